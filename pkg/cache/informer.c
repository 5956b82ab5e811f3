/*
 * informer: one kind's shared informer -- a reflector feeding a delta queue,
 * processed into the store and out to the registered handlers, on the loop
 * thread.
 *
 * Design note. Processing runs in an ev_check watcher (after every poll) in
 * batches of opts.batch notifications, with an ev_idle watcher active while
 * work is queued so that the loop does not block in poll meanwhile. A big
 * relist thus interleaves with network I/O instead of freezing the loop: its
 * ReplacedAll is built beside the store a batch at a time and swapped in with
 * one locked step (listers on other threads see the old list or the new one,
 * never a mix), then its deletes and its adds/updates go out over as many
 * batches as they take, before any later delta (delta.c has the queue model
 * and how it differs from client-go).
 *
 * Deltas are numbered as they reach the store (a relist when it is swapped in). A handler gets the
 * notifications of the deltas numbered above the store state it started from:
 * all of them if added before start; if added later, the store as it was then
 * (a snapshot, as initial adds) and the deltas after. Such a late handler is
 * fed its snapshot at its own pace, a batch per round, while the others go on
 * receiving deltas; what happens meanwhile is kept for it in order (a backlog,
 * as client-go's per-listener buffer) and delivered after the snapshot. So it
 * never sees an update for an object it was not given, nor an older state after
 * a newer one, and nobody waits for it. client-go gives each handler its own
 * goroutine and buffer; here handlers are called in turn on the loop thread
 * (they must not block), and only a catching-up handler has a buffer.
 *
 * One libev timer serves the reflector's deadline (retry, stall) and the
 * handlers' resync deadlines -- the latter only while the reflector watches,
 * as client-go's resync runs inside its watch loop; both are in the injected
 * clock's time, so with a fake clock tests run them by hand
 * (cache_informer_tick).
 */
#include "pkg/cache/internal.h"
#include <ckube/log.h>

#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Merged parts (see inf_part_t): how long after a part is added the union is
 * listed again, so that the parts a replica takes one after another (a few ms
 * apart) cost one list of everything, not one each. */
#define CACHE_MERGED_REMAKE_DELAY_NS (200 * CK_NS_PER_MS)
/* ... but no later than this after the first part added since the last list: a
 * steady trickle of adds must not postpone the list for ever. */
#define CACHE_MERGED_REMAKE_MAX_NS (CK_NS_PER_SEC)

/* A notification kept for a handler that is still catching up. */
typedef struct note {
	uint8_t kind;  /* NOTE_* */
	bool flag;     /* add: initial; delete: final state unknown */
	ck_obj_t *old; /* update: one reference */
	ck_obj_t *obj; /* one reference */
} note_t;

enum { NOTE_ADD, NOTE_UPDATE, NOTE_DELETE };

struct ck_cache_handler_reg {
	ck_cache_informer_t *inf;
	ck_cache_handler_t h;
	void *ud;
	uint64_t resync_ns;
	uint64_t next_resync_ns;
	bool syncing; /* its resync is due: it gets the unchanged-RV updates */
	bool removed;
	uint64_t join_seq; /* it gets the notifications of deltas numbered above */
	bool catching_up;  /* snapshot or backlog still to deliver (late handler) */
	bool snap_done;    /* got its snapshot (or had none to get) */
	_Atomic bool synced;
	unsigned id;          /* 1, 2, ... in order of registration: the trace's handler= */
	ck_cache_objs_t snap; /* the store when it was added, sent as initial adds */
	size_t snap_pos;
	note_t *bl; /* notifications since, in order, sent after the snapshot */
	size_t bl_pos, bl_n, bl_cap;
	struct ck_cache_handler_reg *next;
};

/* A ReplacedAll or SyncAll being delivered, over as many batches as it takes. */
typedef struct compound {
	bool active;
	uint8_t type; /* CACHE_DELTA_REPLACED_ALL or CACHE_DELTA_SYNC_ALL */
	bool initial;
	uint64_t seq;             /* numbered when it reaches the store */
	cache_store_repl_t *repl; /* replaced: the new content, until it is swapped in */
	size_t built;             /* replaced: items in repl so far */
	ck_obj_t **news;          /* the list's items, or the store (sync); references */
	ck_obj_t **olds;          /* replaced: what news[i] replaced, or NULL; references */
	size_t n;
	ck_cache_objs_t gone; /* replaced: keys not listed, their last state */
	size_t pos;           /* next notification: gone first, then news */
	uint16_t part;        /* replaced: the tag of the part it lists; 0 = all */
} compound_t;

/*
 * A part (opts.shard_parts): one range of the shard field's hash space with its
 * own reflector, so that parts come and go without touching the others' watches.
 * Its list replaces only the store's objects inside its range. Its deltas carry
 * its tag, unique for the informer's life (65535 adds), so that the deltas of a
 * removed part still queued are recognised and dropped, even if the same id
 * comes back.
 *
 * That economy holds only where the server filters: where it does not, every
 * part's list and watch carries the whole collection, and n parts cost n times
 * one unsharded informer. So the first part added lists alone (the probe) and the
 * others wait for its list; then, if the server sent objects outside the part (or
 * does so later), the parts are merged: one reflector (mrefl) whose selector is
 * the union of their ranges, remade with a new tag (a list of everything, once)
 * when parts are added, left as it is when parts go (their objects are dropped
 * here). A part waiting or merged has no reflector of its own (refl NULL).
 */
typedef struct inf_part {
	ck_cache_informer_t *inf;
	uint32_t id;
	uint16_t tag;
	ck_shard_range_t range;
	cache_reflector_t *refl;
	_Atomic bool synced; /* its first list is in the store and out to the handlers */
} inf_part_t;

struct ck_cache_informer {
	struct ev_loop *loop;
	const ck_type_t *type;
	char *name;
	ck_cache_lw_t *lw;
	ck_cache_store_t *store;
	cache_dq_t dq;
	cache_reflector_t *refl;
	const ck_clk_t *clk;
	uint64_t default_resync_ms; /* for ck_cache_informer_add_handler */
	uint64_t check_resync_ms;   /* client-go's resyncCheckPeriod: the shortest allowed */
	uint32_t batch;
	ck_cache_transform_fn transform;
	void *transform_ud;
	ck_cache_watch_error_fn on_watch_error;
	void *watch_error_ud;

	ck_cache_handler_reg_t *handlers, *handlers_tail;
	unsigned handlers_added; /* registrations so far: the next handler's id */
	size_t ncatching;        /* handlers catching up */
	uint64_t seq;            /* deltas begun; the store reflects all of them */
	compound_t cur;
	int dispatching;
	int processing;
	bool need_sweep;

	ev_timer timer;
	ev_check check;
	ev_idle idle;
	_Atomic bool started; /* read by sync_reason from any thread */
	bool stopped;

	pthread_mutex_t mu;
	pthread_cond_t cond;
	_Atomic bool synced;
	_Atomic bool wait_stopped;
	char *last_err; /* under mu */
	_Atomic bool have_tid;
	pthread_t loop_tid;
	_Atomic uint64_t n_deltas;
	cache_check_t *consistency; /* opts.consistency_check_ms, or NULL */
	char *last_sync_rv;         /* the reflector's, copied by the loop thread; under mu */

	/* opts.shard_parts: refl is NULL and every part has its own, or mrefl serves
	 * them all. The array, the parts' refl and mrefl are changed on the loop
	 * thread under mu (part_synced and the stats read them elsewhere). */
	bool parted;
	bool probed;     /* a part's list is in: new parts start at once */
	bool merged;     /* the server does not filter: mrefl serves the parts */
	bool settle_due; /* a part's list is in or it met a stray: settle() */
	cache_reflector_t *mrefl;
	uint16_t mtag;             /* mrefl's lists' tag; 0 while there is none */
	uint64_t mremake_ns;       /* merged and parts added: remake mrefl then; 0: not due */
	uint64_t mremake_first_ns; /* when the first of those parts was added */
	bool part_gone_in_build;   /* a list being built may hold a removed part's objects */
	ck_shard_field_t part_field;
	cache_reflector_opts_t part_ro; /* every part's reflector options but the shard */
	ck_cache_lw_t *part_lw;
	inf_part_t **parts;
	size_t nparts;
	uint16_t part_tags;                 /* the last tag handed out */
	cache_reflector_stats_t parts_gone; /* removed parts' counters, kept in the totals */
};

/* ---------------------------------------------------------------- scheduling */

static uint64_t resync_deadline(const ck_cache_informer_t *inf)
{
	uint64_t d = UINT64_MAX;
	for (const ck_cache_handler_reg_t *r = inf->handlers; r != NULL; r = r->next)
		if (!r->removed && r->resync_ns > 0 && r->next_resync_ns < d)
			d = r->next_resync_ns;
	return d;
}

/* The earliest reflector deadline (parts: over all of them). */
static uint64_t refl_deadline(const ck_cache_informer_t *inf)
{
	if (!inf->parted)
		return cache_reflector_deadline(inf->refl);
	if (inf->settle_due)
		return 0;
	uint64_t d = inf->mremake_ns != 0 ? inf->mremake_ns : UINT64_MAX;
	if (inf->mrefl != NULL && cache_reflector_deadline(inf->mrefl) < d)
		d = cache_reflector_deadline(inf->mrefl);
	for (size_t i = 0; i < inf->nparts; i++) {
		if (inf->parts[i]->refl == NULL)
			continue;
		uint64_t pd = cache_reflector_deadline(inf->parts[i]->refl);
		if (pd < d)
			d = pd;
	}
	return d;
}

/* Whether a watch runs (parts: any part's), the condition for resyncs. */
static bool refl_watching(const ck_cache_informer_t *inf)
{
	if (!inf->parted)
		return cache_reflector_watching(inf->refl);
	if (inf->mrefl != NULL && cache_reflector_watching(inf->mrefl))
		return true;
	for (size_t i = 0; i < inf->nparts; i++)
		if (inf->parts[i]->refl != NULL && cache_reflector_watching(inf->parts[i]->refl))
			return true;
	return false;
}

static void rearm(ck_cache_informer_t *inf)
{
	if (!inf->started || inf->stopped)
		return;
	uint64_t d = refl_deadline(inf);
	/* Resyncs wait while the reflector lists or backs off: no timer for them. */
	uint64_t rd = refl_watching(inf) ? resync_deadline(inf) : UINT64_MAX;
	if (rd < d)
		d = rd;
	ev_timer_stop(inf->loop, &inf->timer);
	if (d == UINT64_MAX)
		return;
	uint64_t now = ck_clk_mono_ns(inf->clk);
	double after = d > now ? (double)(d - now) / 1e9 : 0.0;
	ev_timer_set(&inf->timer, after, 0.0);
	ev_timer_start(inf->loop, &inf->timer);
}

static void schedule(ck_cache_informer_t *inf)
{
	if (inf->started && !inf->stopped && !ev_is_active(&inf->idle))
		ev_idle_start(inf->loop, &inf->idle);
}

static void note_loop_thread(ck_cache_informer_t *inf)
{
	if (!atomic_load_explicit(&inf->have_tid, memory_order_relaxed)) {
		inf->loop_tid = pthread_self();
		atomic_store_explicit(&inf->have_tid, true, memory_order_release);
	}
}

static bool on_loop_thread(ck_cache_informer_t *inf)
{
	return atomic_load_explicit(&inf->have_tid, memory_order_acquire) &&
	       pthread_equal(inf->loop_tid, pthread_self());
}

/* ---------------------------------------------------------------- parts */

static inf_part_t *part_by_tag(const ck_cache_informer_t *inf, uint16_t tag)
{
	for (size_t i = 0; i < inf->nparts; i++)
		if (inf->parts[i]->tag == tag)
			return inf->parts[i];
	return NULL;
}

static size_t part_index(const ck_cache_informer_t *inf, uint32_t id)
{
	for (size_t i = 0; i < inf->nparts; i++)
		if (inf->parts[i]->id == id)
			return i;
	return SIZE_MAX;
}

/* Whether obj belongs to one of the parts now. Each part's reflector keeps only its
 * own range, so an object outside them all comes from a removed part's deltas,
 * still queued when it went. */
static bool all_parts_synced(const ck_cache_informer_t *inf)
{
	for (size_t i = 0; i < inf->nparts; i++)
		if (!atomic_load(&inf->parts[i]->synced))
			return false;
	return true;
}

/* A tag for a new part or mrefl: never 0 (the whole informer's) nor one in use. */
static uint16_t new_tag(ck_cache_informer_t *inf)
{
	uint16_t t;
	do
		t = ++inf->part_tags;
	while (t == 0 || t == inf->mtag || part_by_tag(inf, t) != NULL);
	return t;
}

static void settle(ck_cache_informer_t *inf);
static void remake(ck_cache_informer_t *inf);

static bool in_parts(const ck_cache_informer_t *inf, const ck_obj_t *obj)
{
	uint64_t h = ck_shard_obj_hash(inf->part_field, obj);
	for (size_t i = 0; i < inf->nparts; i++)
		if (ck_shard_range_contains(inf->parts[i]->range, h))
			return true;
	return false;
}

/* ---------------------------------------------------------------- dispatch */

static void note_drop(note_t *n)
{
	ck_obj_unref(n->old);
	ck_obj_unref(n->obj);
}

static void catchup_free(ck_cache_handler_reg_t *r)
{
	ck_cache_objs_free(&r->snap);
	r->snap_pos = 0;
	for (size_t i = r->bl_pos; i < r->bl_n; i++)
		note_drop(&r->bl[i]);
	free(r->bl);
	r->bl = NULL;
	r->bl_pos = r->bl_n = r->bl_cap = 0;
}

static void sweep(ck_cache_informer_t *inf)
{
	inf->need_sweep = false;
	ck_cache_handler_reg_t **pp = &inf->handlers;
	inf->handlers_tail = NULL;
	while (*pp != NULL) {
		ck_cache_handler_reg_t *r = *pp;
		if (r->removed) {
			*pp = r->next;
			catchup_free(r);
			free(r);
		} else {
			inf->handlers_tail = r;
			pp = &r->next;
		}
	}
}

static void dispatch_begin(ck_cache_informer_t *inf)
{
	inf->dispatching++;
}

static void dispatch_end(ck_cache_informer_t *inf)
{
	if (--inf->dispatching == 0 && inf->need_sweep)
		sweep(inf);
}

static const char *const note_names[] = {"add", "update", "delete"};

/* The key trace's line for a notification about to be delivered to r. */
static void trace_note(const ck_cache_handler_reg_t *r, int kind, bool flag, const ck_obj_t *old,
                       const ck_obj_t *obj)
{
	CACHE_TRACE(obj, "handler-notified", CK_KV_STR("resource", r->inf->name),
	            CK_KV_UINT("handler", r->id), CK_KV_STR("event", note_names[kind]),
	            CK_KV_STR("rv", obj->rv),
	            kind == NOTE_ADD      ? CK_KV_BOOL("initialList", flag)
	            : kind == NOTE_DELETE ? CK_KV_BOOL("finalStateUnknown", flag)
	                                  : CK_KV_BOOL("resync", strcmp(old->rv, obj->rv) == 0));
}

/* Calls r's callback for one notification (all borrowed). */
static void deliver(ck_cache_handler_reg_t *r, int kind, bool flag, ck_obj_t *old, ck_obj_t *obj)
{
	trace_note(r, kind, flag, old, obj);
	switch (kind) {
	case NOTE_ADD:
		if (r->h.on_add != NULL)
			r->h.on_add(r->ud, obj, flag);
		break;
	case NOTE_UPDATE:
		if (r->h.on_update != NULL)
			r->h.on_update(r->ud, old, obj);
		break;
	case NOTE_DELETE:
		if (r->h.on_delete != NULL) {
			cache_keybuf_t kb;
			cache_keybuf_set(&kb, obj);
			r->h.on_delete(r->ud, kb.s, obj, flag);
			cache_keybuf_free(&kb);
		}
		break;
	}
}

static bool has_callback(const ck_cache_handler_reg_t *r, int kind)
{
	return kind == NOTE_ADD      ? r->h.on_add != NULL
	       : kind == NOTE_UPDATE ? r->h.on_update != NULL
	                             : r->h.on_delete != NULL;
}

static void backlog_push(ck_cache_handler_reg_t *r, int kind, bool flag, ck_obj_t *old,
                         ck_obj_t *obj)
{
	if (r->bl_pos > 0 && r->bl_pos == r->bl_n)
		r->bl_pos = r->bl_n = 0;
	if (r->bl_n == r->bl_cap) {
		r->bl_cap = r->bl_cap ? r->bl_cap * 2 : 16;
		r->bl = ck_xrealloc(r->bl, r->bl_cap * sizeof(*r->bl));
	}
	r->bl[r->bl_n++] = (note_t){
	    .kind = (uint8_t)kind,
	    .flag = flag,
	    .old = old ? ck_obj_ref(old) : NULL,
	    .obj = ck_obj_ref(obj),
	};
}

/*
 * One notification of delta seq to every handler that is owed it: not to one
 * added after that delta reached the store (its snapshot has the result), an
 * unchanged-RV update (resync, or relist of an unchanged object) only to those
 * whose resync is due. A handler still catching up gets it in its backlog.
 */
static void dispatch(ck_cache_informer_t *inf, uint64_t seq, int kind, bool flag, ck_obj_t *old,
                     ck_obj_t *obj)
{
	bool is_sync = kind == NOTE_UPDATE && strcmp(old->rv, obj->rv) == 0;
	dispatch_begin(inf);
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL && !inf->stopped; r = r->next) {
		if (r->removed || seq <= r->join_seq || (is_sync && !r->syncing) ||
		    !has_callback(r, kind))
			continue;
		if (r->catching_up)
			backlog_push(r, kind, flag, old, obj);
		else
			deliver(r, kind, flag, old, obj);
	}
	dispatch_end(inf);
}

/* An Added, Updated or Deleted: applied to the store, then told. */
static void apply_one(ck_cache_informer_t *inf, cache_delta_t *d, bool initial)
{
	if (inf->parted && !in_parts(inf, d->obj))
		return;
	uint64_t seq = ++inf->seq;
	atomic_fetch_add_explicit(&inf->n_deltas, 1, memory_order_relaxed);
	if (d->type == CACHE_DELTA_DELETED) {
		ck_obj_t *gone = cache_store_delete_obj(inf->store, d->obj);
		CACHE_TRACE(d->obj, "store-updated", CK_KV_STR("resource", inf->name),
		            CK_KV_STR("op", "delete"), CK_KV_STR("rv", d->obj->rv),
		            CK_KV_BOOL("wasStored", gone != NULL));
		ck_obj_unref(gone);
		dispatch(inf, seq, NOTE_DELETE, false, NULL, d->obj);
		return;
	}
	ck_obj_t *old = ck_cache_store_upsert(inf->store, d->obj);
	CACHE_TRACE(d->obj, "store-updated", CK_KV_STR("resource", inf->name),
	            CK_KV_STR("op", old != NULL ? "update" : "add"), CK_KV_STR("rv", d->obj->rv),
	            CK_KV_STR("oldRV", old != NULL ? old->rv : ""));
	if (old != NULL) {
		dispatch(inf, seq, NOTE_UPDATE, false, old, d->obj);
		ck_obj_unref(old);
	} else {
		dispatch(inf, seq, NOTE_ADD, initial, NULL, d->obj);
	}
}

static void compound_free(compound_t *c)
{
	cache_store_replace_abort(c->repl);
	for (size_t i = 0; i < c->n; i++) {
		ck_obj_unref(c->news[i]);
		if (c->olds != NULL)
			ck_obj_unref(c->olds[i]);
	}
	free(c->news);
	free(c->olds);
	ck_cache_objs_free(&c->gone);
	memset(c, 0, sizeof(*c));
}

static bool any_syncing(const ck_cache_informer_t *inf)
{
	for (const ck_cache_handler_reg_t *r = inf->handlers; r != NULL; r = r->next)
		if (!r->removed && r->syncing)
			return true;
	return false;
}

/*
 * A ReplacedAll is built beside the store a batch at a time, then swapped in
 * at once (readers never see a relist half applied, and a big one does not
 * freeze the loop); a SyncAll takes the store as it is. Their notifications
 * follow. Takes d's references.
 */
/*
 * A part's list replaces only its own range: the objects outside it go into the
 * new content first, unchanged and untold (they are not the list's to judge).
 */
static void keep_other_parts(ck_cache_informer_t *inf, cache_store_repl_t *repl,
                             ck_shard_range_t range)
{
	ck_cache_objs_t all;
	cache_store_list_nolock(inf->store, &all);
	for (size_t i = 0; i < all.n; i++) {
		if (ck_shard_range_contains(range,
		                            ck_shard_obj_hash(inf->part_field, all.items[i])))
			continue;
		ck_obj_t *was = NULL;
		cache_store_replace_add(repl, &all.items[i], 1, &was);
		ck_obj_unref(was);
	}
	ck_cache_objs_free(&all);
}

/* Returns false when d is dropped: the list of a part removed since. */
static bool begin_compound(ck_cache_informer_t *inf, cache_delta_t *d, bool initial)
{
	compound_t *c = &inf->cur;
	inf_part_t *part = NULL;
	bool merged = d->type == CACHE_DELTA_REPLACED_ALL && d->part != 0 && d->part == inf->mtag;
	if (d->type == CACHE_DELTA_REPLACED_ALL && d->part != 0 && !merged &&
	    (part = part_by_tag(inf, d->part)) == NULL)
		return false;
	memset(c, 0, sizeof(*c));
	c->active = true;
	c->type = d->type;
	c->initial = part != NULL ? !atomic_load(&part->synced) : initial;
	if (merged)
		c->initial = !all_parts_synced(inf);
	if (d->type == CACHE_DELTA_REPLACED_ALL) {
		c->news = d->items;
		c->n = d->n;
		c->part = d->part;
		d->items = NULL;
		d->n = 0;
		/* The merged list replaces everything, but not with the objects of parts
		 * removed since it was asked for. */
		if (merged) {
			size_t k = 0;
			for (size_t i = 0; i < c->n; i++) {
				if (in_parts(inf, c->news[i]))
					c->news[k++] = c->news[i];
				else
					ck_obj_unref(c->news[i]);
			}
			c->n = k;
		}
		c->olds = c->n ? ck_xcalloc(c->n, sizeof(*c->olds)) : NULL;
		c->repl = cache_store_replace_begin(inf->store);
		if (part != NULL)
			keep_other_parts(inf, c->repl, part->range);
		return true;
	}
	c->seq = ++inf->seq;
	if (any_syncing(inf)) {
		ck_cache_objs_t snap;
		cache_store_list_nolock(inf->store, &snap);
		c->news = snap.items;
		c->n = snap.n;
	}
	return true;
}

/* The key trace's line for a list (the first or a relist) swapped into the store: the
 * traced key's object was listed (added or updated) or is gone (deleted: a tombstone
 * follows). */
static void trace_replaced(const ck_cache_informer_t *inf, const compound_t *c)
{
	for (size_t i = 0; i < c->gone.n; i++)
		CACHE_TRACE(c->gone.items[i], "store-updated", CK_KV_STR("resource", inf->name),
		            CK_KV_STR("op", "delete"), CK_KV_STR("rv", c->gone.items[i]->rv),
		            CK_KV_STR("by", "list: not in it"));
	for (size_t i = 0; i < c->n; i++)
		CACHE_TRACE(c->news[i], "store-updated", CK_KV_STR("resource", inf->name),
		            CK_KV_STR("op", c->olds[i] != NULL ? "update" : "add"),
		            CK_KV_STR("rv", c->news[i]->rv),
		            CK_KV_STR("oldRV", c->olds[i] != NULL ? c->olds[i]->rv : ""),
		            CK_KV_STR("by", "list"));
}

/* A part went while this list was built beside the store: what the new content
 * holds of it (listed, or kept from the other parts) leaves again, untold. */
static void drop_strays(ck_cache_informer_t *inf, compound_t *c)
{
	inf->part_gone_in_build = false;
	ck_cache_objs_t all;
	cache_store_list_nolock(inf->store, &all);
	for (size_t i = 0; i < all.n; i++)
		if (!in_parts(inf, all.items[i]))
			ck_obj_unref(cache_store_delete_obj(inf->store, all.items[i]));
	ck_cache_objs_free(&all);
	size_t k = 0;
	for (size_t i = 0; i < c->n; i++) {
		if (in_parts(inf, c->news[i])) {
			c->news[k] = c->news[i];
			c->olds[k++] = c->olds[i];
			continue;
		}
		ck_obj_unref(c->news[i]);
		ck_obj_unref(c->olds[i]);
	}
	c->n = c->built = k;
}

/* Builds the relist's content, up to budget items; returns the budget left. */
static size_t build_replace(ck_cache_informer_t *inf, size_t budget)
{
	compound_t *c = &inf->cur;
	size_t k = c->n - c->built < budget ? c->n - c->built : budget;
	cache_store_replace_add(c->repl, c->news + c->built, k, c->olds + c->built);
	c->built += k;
	budget -= k;
	if (c->built == c->n) {
		/* The store changes here: a handler added from now on starts from the new
		 * content and must not get this relist's notifications. */
		cache_store_replace_commit(c->repl, &c->gone);
		c->repl = NULL;
		if (inf->part_gone_in_build)
			drop_strays(inf, c);
		if (log_trace_on())
			trace_replaced(inf, c);
		c->seq = ++inf->seq;
		atomic_fetch_add_explicit(&inf->n_deltas, c->n + c->gone.n, memory_order_relaxed);
	}
	return budget;
}

/* Delivers up to budget notifications of the compound delta; returns the budget left. */
static size_t continue_compound(ck_cache_informer_t *inf, size_t budget)
{
	compound_t *c = &inf->cur;
	if (c->repl != NULL) {
		budget = build_replace(inf, budget);
		if (c->repl != NULL)
			return budget;
	}
	while (budget > 0 && !inf->stopped && c->pos < c->gone.n + c->n) {
		size_t at = c->pos++;
		budget--;
		if (at < c->gone.n) {
			dispatch(inf, c->seq, NOTE_DELETE, true, NULL, c->gone.items[at]);
			continue;
		}
		at -= c->gone.n;
		ck_obj_t *old = c->type == CACHE_DELTA_REPLACED_ALL ? c->olds[at] : c->news[at];
		if (old != NULL)
			dispatch(inf, c->seq, NOTE_UPDATE, false, old, c->news[at]);
		else
			dispatch(inf, c->seq, NOTE_ADD, c->initial, NULL, c->news[at]);
	}
	if (!inf->stopped && c->pos == c->gone.n + c->n) {
		inf_part_t *part = c->part != 0 ? part_by_tag(inf, c->part) : NULL;
		if (part != NULL && !atomic_load(&part->synced)) {
			atomic_store(&part->synced, true);
			CK_LOG_V(2, "Part of the cache populated", CK_KV_STR("resource", inf->name),
			         CK_KV_UINT("part", part->id), CK_KV_UINT("listed", c->n));
		}
		if (c->part != 0 && c->part == inf->mtag) {
			/* Every part now was there when mrefl was made: an add remakes it. */
			for (size_t i = 0; i < inf->nparts; i++)
				atomic_store(&inf->parts[i]->synced, true);
			CK_LOG_V(2, "Parts of the cache populated by one list",
			         CK_KV_STR("resource", inf->name), CK_KV_UINT("parts", inf->nparts),
			         CK_KV_UINT("listed", c->n));
		} else if (part != NULL && !inf->merged) {
			inf->settle_due = true; /* the probe's answer, or more of it */
			rearm(inf);
		}
		compound_free(c);
		cache_dq_done(&inf->dq);
	}
	return budget;
}

static void mark_synced(ck_cache_informer_t *inf)
{
	pthread_mutex_lock(&inf->mu);
	atomic_store(&inf->synced, true);
	free(inf->last_err);
	inf->last_err = NULL;
	pthread_cond_broadcast(&inf->cond);
	pthread_mutex_unlock(&inf->mu);
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL; r = r->next)
		if (r->snap_done)
			atomic_store(&r->synced, true);
	CK_LOG_V(2, "Caches populated", CK_KV_STR("resource", inf->name),
	         CK_KV_UINT("objects", ck_cache_store_len(inf->store)));
}

/*
 * Feeds each late handler up to budget of its snapshot, then of the backlog of
 * notifications made since; once both are empty it gets notifications directly.
 */
static void catch_up(ck_cache_informer_t *inf, size_t budget)
{
	dispatch_begin(inf);
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL && !inf->stopped; r = r->next) {
		size_t b = budget;
		while (r->catching_up && !r->removed && !inf->stopped && b > 0) {
			if (r->snap_pos < r->snap.n) {
				b--;
				if (r->h.on_add != NULL) {
					trace_note(r, NOTE_ADD, true, NULL,
					           r->snap.items[r->snap_pos]);
					r->h.on_add(r->ud, r->snap.items[r->snap_pos], true);
				}
				r->snap_pos++;
				continue;
			}
			if (!r->snap_done) {
				ck_cache_objs_free(&r->snap);
				r->snap_pos = 0;
				r->snap_done = true;
				if (atomic_load(&inf->synced))
					atomic_store(&r->synced, true);
			}
			if (r->bl_pos < r->bl_n) {
				note_t n = r->bl[r->bl_pos++];
				b--;
				deliver(r, n.kind, n.flag, n.old, n.obj);
				note_drop(&n);
				continue;
			}
			free(r->bl);
			r->bl = NULL;
			r->bl_pos = r->bl_n = r->bl_cap = 0;
			r->catching_up = false;
			inf->ncatching--;
		}
	}
	dispatch_end(inf);
}

/* Shutdown's cleanup, once no callback is running. */
static void drop_work(ck_cache_informer_t *inf)
{
	cache_dq_free(&inf->dq);
	cache_dq_init(&inf->dq);
	compound_free(&inf->cur);
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL; r = r->next) {
		catchup_free(r);
		r->catching_up = false;
	}
	inf->ncatching = 0;
}

static bool pending_work(const ck_cache_informer_t *inf)
{
	return cache_dq_len(&inf->dq) > 0 || inf->cur.active || inf->ncatching > 0;
}

static void note_last_sync_rv(ck_cache_informer_t *inf);

/* The key trace's line for a delta queued or popped: its object, or the traced key's
 * object in a relist's list (a SyncAll names no object). Only called while on. */
static void trace_delta(const ck_cache_informer_t *inf, bool popped, const cache_delta_t *d,
                        bool initial)
{
	if (d->type == CACHE_DELTA_SYNC_ALL)
		return;
	const char *step = popped ? "delta-popped" : "delta-queued";
	const char *type = cache_delta_type_name((cache_delta_type_t)d->type);
	bool all = d->type == CACHE_DELTA_REPLACED_ALL;
	for (uint32_t i = 0; i < (all ? d->n : 1); i++) {
		const ck_obj_t *o = all ? d->items[i] : d->obj;
		if (popped)
			CACHE_TRACE(o, step, CK_KV_STR("resource", inf->name),
			            CK_KV_STR("type", type), CK_KV_STR("rv", o->rv),
			            CK_KV_BOOL("initialList", initial),
			            CK_KV_UINT("stillQueued", cache_dq_len(&inf->dq)));
		else
			CACHE_TRACE(o, step, CK_KV_STR("resource", inf->name),
			            CK_KV_STR("type", type), CK_KV_STR("rv", o->rv),
			            CK_KV_UINT("queued", cache_dq_len(&inf->dq)));
	}
}

static void process(ck_cache_informer_t *inf, size_t budget)
{
	note_last_sync_rv(inf);
	if (!inf->started || inf->stopped)
		return;
	inf->processing++;
	/* Late handlers get their own share, so delta processing never waits for
	 * their snapshots. */
	if (inf->ncatching > 0)
		catch_up(inf, budget);
	while (budget > 0 && !inf->stopped) {
		if (inf->cur.active) {
			budget = continue_compound(inf, budget);
			if (inf->cur.active)
				break;
			continue;
		}
		cache_delta_t d;
		bool initial;
		if (!cache_dq_pop(&inf->dq, &d, &initial))
			break;
		budget--;
		if (log_trace_on())
			trace_delta(inf, true, &d, initial);
		if (d.type == CACHE_DELTA_REPLACED_ALL || d.type == CACHE_DELTA_SYNC_ALL) {
			if (!begin_compound(inf, &d, initial))
				cache_dq_done(&inf->dq);
		} else {
			apply_one(inf, &d, initial);
			if (!inf->stopped)
				cache_dq_done(&inf->dq);
		}
		cache_dq_delta_free(&d);
	}
	inf->processing--;
	if (inf->stopped) {
		if (inf->processing == 0)
			drop_work(inf);
		return;
	}
	if (!atomic_load(&inf->synced) && !inf->cur.active && cache_dq_has_synced(&inf->dq))
		mark_synced(inf);
	if (!pending_work(inf))
		ev_idle_stop(inf->loop, &inf->idle);
}

static void check_cb(struct ev_loop *loop, ev_check *w, int revents)
{
	(void)loop;
	(void)revents;
	ck_cache_informer_t *inf = w->data;
	note_loop_thread(inf);
	process(inf, inf->batch);
}

static void idle_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
	/* Only keeps poll from blocking while work is queued; check_cb does it. */
	(void)loop;
	(void)w;
	(void)revents;
}

/* ---------------------------------------------------------------- timers */

static void resync_tick(ck_cache_informer_t *inf, uint64_t now)
{
	/* client-go's resync timer runs in the watch loop: a resync due while the
	 * reflector lists or backs off waits for the next watch (and is then due at
	 * once, not a whole period later). The relist itself refreshes every object. */
	if (!refl_watching(inf))
		return;
	bool any = false;
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL; r = r->next)
		if (!r->removed && r->resync_ns > 0 && now >= r->next_resync_ns)
			any = true;
	if (!any)
		return;
	/* The set of syncing handlers changes only when some period is due, so Sync
	 * deltas still queued from the last resync keep their audience otherwise. */
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL; r = r->next) {
		r->syncing = !r->removed && r->resync_ns > 0 && now >= r->next_resync_ns;
		if (r->syncing)
			r->next_resync_ns = now + r->resync_ns;
	}
	cache_dq_resync(&inf->dq);
	schedule(inf);
}

static void tick(ck_cache_informer_t *inf)
{
	if (!inf->started || inf->stopped)
		return;
	uint64_t now = ck_clk_mono_ns(inf->clk);
	if (!inf->parted)
		cache_reflector_tick(inf->refl, now);
	if (inf->settle_due)
		settle(inf);
	if (inf->mremake_ns != 0 && now >= inf->mremake_ns)
		remake(inf);
	if (inf->mrefl != NULL)
		cache_reflector_tick(inf->mrefl, now);
	/* A tick may fail a part's request, whose error callback may not remove parts;
	 * the array is stable here. */
	for (size_t i = 0; i < inf->nparts && !inf->stopped; i++)
		if (inf->parts[i]->refl != NULL)
			cache_reflector_tick(inf->parts[i]->refl, now);
	if (inf->stopped)
		return;
	resync_tick(inf, now);
	rearm(inf);
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	ck_cache_informer_t *inf = w->data;
	note_loop_thread(inf);
	tick(inf);
}

/* ---------------------------------------------------------------- reflector sink */

static ck_obj_t *transformed(ck_cache_informer_t *inf, ck_obj_t *obj)
{
	if (inf->transform == NULL)
		return obj;
	ck_obj_t *t = inf->transform(inf->transform_ud, obj);
	if (t == NULL)
		return obj;
	ck_obj_unref(obj);
	return t;
}

static void queue_replace(ck_cache_informer_t *inf, ck_obj_t **items, size_t n, uint16_t part)
{
	for (size_t i = 0; i < n; i++)
		items[i] = transformed(inf, items[i]);
	cache_dq_replace(&inf->dq, items, n, part);
	/* items now belongs to the queue, alive until popped (none to read when n is 0). */
	if (log_trace_on())
		trace_delta(inf, false,
		            &(cache_delta_t){
		                .type = CACHE_DELTA_REPLACED_ALL, .n = (uint32_t)n, .items = items},
		            false);
	schedule(inf);
	/* A streaming list ends inside a watch that goes on: resyncs may run now. */
	rearm(inf);
}

static void sink_replace(void *ud, ck_obj_t **items, size_t n, const char *rv)
{
	(void)rv;
	queue_replace(ud, items, n, 0);
}

static void sink_event(void *ud, ck_watch_type_t type, ck_obj_t *obj)
{
	ck_cache_informer_t *inf = ud;
	obj = transformed(inf, obj);
	cache_delta_type_t dt = type == CK_WATCH_ADDED     ? CACHE_DELTA_ADDED
	                        : type == CK_WATCH_DELETED ? CACHE_DELTA_DELETED
	                                                   : CACHE_DELTA_UPDATED;
	cache_dq_add(&inf->dq, dt, obj);
	if (log_trace_on())
		trace_delta(inf, false, &(cache_delta_t){.type = (uint8_t)dt, .obj = obj}, false);
	schedule(inf);
}

static void sink_error(void *ud, const char *msg, const ck_result_t *res, bool healing)
{
	ck_cache_informer_t *inf = ud;
	pthread_mutex_lock(&inf->mu);
	free(inf->last_err);
	inf->last_err = ck_xstrdup(msg);
	pthread_mutex_unlock(&inf->mu);
	if (inf->on_watch_error != NULL)
		inf->on_watch_error(inf->watch_error_ud, inf, msg, res, healing);
}

static void sink_rearm(void *ud)
{
	rearm(ud);
}

static const cache_reflector_sink_t sink = {
    .replace = sink_replace,
    .event = sink_event,
    .error = sink_error,
    .rearm = sink_rearm,
};

/* A part's reflector: the same, its lists tagged with the part. */
static void part_sink_replace(void *ud, ck_obj_t **items, size_t n, const char *rv)
{
	inf_part_t *p = ud;
	(void)rv;
	queue_replace(p->inf, items, n, p->tag);
}

static void part_sink_event(void *ud, ck_watch_type_t type, ck_obj_t *obj)
{
	inf_part_t *p = ud;
	ck_cache_informer_t *inf = p->inf;
	/* A stray after an empty list: the server does not filter after all. */
	if (!inf->merged && !inf->settle_due &&
	    cache_reflector_shard_mode(p->refl) == CK_CACHE_SHARD_CLIENT) {
		inf->settle_due = true;
		rearm(inf);
	}
	sink_event(inf, type, obj);
}

static void part_sink_error(void *ud, const char *msg, const ck_result_t *res, bool healing)
{
	sink_error(((inf_part_t *)ud)->inf, msg, res, healing);
}

static void part_sink_rearm(void *ud)
{
	rearm(((inf_part_t *)ud)->inf);
}

static const cache_reflector_sink_t part_sink = {
    .replace = part_sink_replace,
    .event = part_sink_event,
    .error = part_sink_error,
    .rearm = part_sink_rearm,
};

/* The merged parts' reflector: its lists tagged with mtag (it is remade, with a
 * new tag, whenever the tag would change). */
static void merged_sink_replace(void *ud, ck_obj_t **items, size_t n, const char *rv)
{
	ck_cache_informer_t *inf = ud;
	(void)rv;
	queue_replace(inf, items, n, inf->mtag);
}

static const cache_reflector_sink_t merged_sink = {
    .replace = merged_sink_replace,
    .event = sink_event,
    .error = sink_error,
    .rearm = sink_rearm,
};

/* ---------------------------------------------------------------- lifecycle */

static char *type_name(const ck_type_t *t)
{
	if (t->group == NULL || t->group[0] == '\0')
		return ck_xstrdup(t->resource);
	return ck_xasprintf("%s.%s", t->resource, t->group);
}

ck_cache_informer_t *ck_cache_informer_new(struct ev_loop *loop, const ck_type_t *t,
                                           ck_cache_lw_t *lw, const ck_cache_informer_opts_t *o)
{
	static const ck_cache_informer_opts_t none = {0};
	if (o == NULL)
		o = &none;
	ck_cache_informer_t *inf = ck_xcalloc(1, sizeof(*inf));
	inf->loop = loop;
	inf->type = t;
	inf->name = type_name(t);
	inf->lw = lw;
	inf->store = ck_cache_store_new();
	cache_dq_init(&inf->dq);
	inf->clk = o->clock ? o->clock : ck_clk_real();
	inf->default_resync_ms = o->default_resync_ms;
	inf->check_resync_ms = o->default_resync_ms;
	inf->batch = o->batch ? o->batch : 1024;
	inf->transform = o->transform;
	inf->transform_ud = o->transform_ud;
	inf->on_watch_error = o->on_watch_error;
	inf->watch_error_ud = o->watch_error_ud;
	cache_reflector_opts_t ro = {
	    .name = inf->name,
	    .label_selector = o->label_selector,
	    .field_selector = o->field_selector,
	    .page_size = o->page_size,
	    .streaming_list = o->streaming_list,
	    .backoff_initial_ns = (uint64_t)o->backoff_initial_ms * CK_NS_PER_MS,
	    .backoff_max_ns = (uint64_t)o->backoff_max_ms * CK_NS_PER_MS,
	    .backoff_reset_ns = (uint64_t)o->backoff_reset_ms * CK_NS_PER_MS,
	    .watch_timeout_min_s = o->watch_timeout_min_s,
	    .watch_timeout_max_s = o->watch_timeout_max_s,
	    .stall_margin_ns = (uint64_t)o->stall_margin_ms * CK_NS_PER_MS,
	    .shard = o->shard_selector,
	};
	if (o->shard_parts) {
		/* Kept for the parts' reflectors, which copy them in turn. */
		inf->parted = true;
		inf->part_field = o->shard_field;
		inf->part_lw = lw;
		inf->part_ro = ro;
		inf->part_ro.name = inf->name;
		inf->part_ro.label_selector =
		    o->label_selector ? ck_xstrdup(o->label_selector) : NULL;
		inf->part_ro.field_selector =
		    o->field_selector ? ck_xstrdup(o->field_selector) : NULL;
		inf->part_ro.shard = NULL;
	} else {
		inf->refl = cache_reflector_new(lw, inf->clk, &ro, &sink, inf);
	}
	if (o->consistency_check_ms > 0 && !o->shard_parts)
		inf->consistency =
		    cache_check_new(inf, loop, lw, o->label_selector, o->field_selector,
		                    o->shard_selector, o->consistency_check_ms);
	ev_timer_init(&inf->timer, timer_cb, 0.0, 0.0);
	inf->timer.data = inf;
	ev_check_init(&inf->check, check_cb);
	inf->check.data = inf;
	ev_idle_init(&inf->idle, idle_cb);
	inf->idle.data = inf;
	pthread_mutex_init(&inf->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&inf->cond, &ca);
	pthread_condattr_destroy(&ca);
	return inf;
}

int ck_cache_informer_start(ck_cache_informer_t *inf, char **err)
{
	if (inf->stopped)
		return ck_err_set(err, "cache: informer %s: start after shutdown", inf->name);
	if (inf->started)
		return 0;
	inf->started = true;
	ev_check_start(inf->loop, &inf->check);
	/* The check watcher alone must not keep ev_run going. */
	ev_unref(inf->loop);
	CK_LOG_V(2, "Starting informer", CK_KV_STR("resource", inf->name));
	if (inf->parted) {
		/* Synced means "caches what it was asked to": with parts, each one's own
		 * first list is what counts (ck_cache_informer_part_synced). */
		for (size_t i = 0; i < inf->nparts; i++)
			if (inf->parts[i]->refl != NULL)
				cache_reflector_start(inf->parts[i]->refl);
		mark_synced(inf);
	} else {
		cache_reflector_start(inf->refl);
	}
	cache_check_start(inf->consistency);
	rearm(inf);
	return 0;
}

void ck_cache_informer_shutdown(ck_cache_informer_t *inf)
{
	if (inf == NULL || inf->stopped)
		return;
	inf->stopped = true;
	cache_check_stop(inf->consistency);
	cache_reflector_stop(inf->refl);
	cache_reflector_stop(inf->mrefl);
	for (size_t i = 0; i < inf->nparts; i++)
		cache_reflector_stop(inf->parts[i]->refl);
	ev_timer_stop(inf->loop, &inf->timer);
	ev_idle_stop(inf->loop, &inf->idle);
	if (ev_is_active(&inf->check)) {
		ev_ref(inf->loop);
		ev_check_stop(inf->loop, &inf->check);
	}
	/* From inside a callback the work in progress is still in use: process()
	 * drops it on its way out. */
	if (inf->processing == 0)
		drop_work(inf);
	pthread_mutex_lock(&inf->mu);
	atomic_store(&inf->wait_stopped, true);
	pthread_cond_broadcast(&inf->cond);
	pthread_mutex_unlock(&inf->mu);
}

void ck_cache_informer_free(ck_cache_informer_t *inf)
{
	if (inf == NULL)
		return;
	ck_cache_informer_shutdown(inf);
	cache_check_free(inf->consistency);
	cache_reflector_free(inf->refl);
	cache_reflector_free(inf->mrefl);
	for (size_t i = 0; i < inf->nparts; i++) {
		cache_reflector_free(inf->parts[i]->refl);
		free(inf->parts[i]);
	}
	free(inf->parts);
	free((char *)inf->part_ro.label_selector);
	free((char *)inf->part_ro.field_selector);
	ck_cache_lw_free(inf->lw);
	drop_work(inf);
	cache_dq_free(&inf->dq);
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL;) {
		ck_cache_handler_reg_t *next = r->next;
		catchup_free(r);
		free(r);
		r = next;
	}
	ck_cache_store_free(inf->store);
	pthread_mutex_destroy(&inf->mu);
	pthread_cond_destroy(&inf->cond);
	free(inf->last_err);
	free(inf->last_sync_rv);
	free(inf->name);
	free(inf);
}

void ck_cache_informer_set_transform(ck_cache_informer_t *inf, ck_cache_transform_fn fn, void *ud)
{
	inf->transform = fn;
	inf->transform_ud = ud;
}

int ck_cache_informer_add_index(ck_cache_informer_t *inf, const char *name, ck_cache_index_fn fn,
                                void *ud, char **err)
{
	return ck_cache_store_add_index(inf->store, name, fn, ud, err);
}

/* ---------------------------------------------------------------- handlers */

ck_cache_handler_reg_t *ck_cache_informer_add_handler_resync(ck_cache_informer_t *inf,
                                                             const ck_cache_handler_t *h, void *ud,
                                                             uint64_t resync_ms)
{
	ck_cache_handler_reg_t *r = ck_xcalloc(1, sizeof(*r));
	r->inf = inf;
	r->h = *h;
	r->ud = ud;
	r->id = ++inf->handlers_added;
	if (resync_ms > 0 && resync_ms < 1000)
		resync_ms = 1000; /* client-go's minimum: a faster resync is a busy loop */
	/* client-go's determineResyncPeriod, with the informer's period as its check
	 * period: an informer that does not resync (0) resyncs no handler; a shorter
	 * period lowers the informer's before it starts and is raised to it after. */
	if (resync_ms > 0 && inf->check_resync_ms == 0) {
		CK_LOG_V(2, "Handler resync period ignored: this informer does not resync",
		         CK_KV_STR("resource", ck_cache_informer_name(inf)),
		         CK_KV_UINT("resyncMs", resync_ms));
		resync_ms = 0;
	} else if (resync_ms > 0 && resync_ms < inf->check_resync_ms) {
		if (inf->started)
			resync_ms = inf->check_resync_ms;
		else
			inf->check_resync_ms = resync_ms;
	}
	r->resync_ns = resync_ms * CK_NS_PER_MS;
	r->next_resync_ns = ck_clk_mono_ns(inf->clk) + r->resync_ns;
	/* The store reflects every delta begun so far, the one being delivered too
	 * (when added from a callback or between batches of a relist): the handler
	 * gets the store as initial adds and the notifications of later deltas only. */
	r->join_seq = inf->seq;
	if (inf->started && !inf->stopped && ck_cache_store_len(inf->store) > 0) {
		/* Delivered at its own pace (catch_up), with what happens meanwhile kept
		 * for it in order, so that the other handlers never wait for it. */
		cache_store_list_nolock(inf->store, &r->snap);
		r->catching_up = true;
		inf->ncatching++;
		schedule(inf);
	} else {
		r->snap_done = true;
		if (atomic_load(&inf->synced))
			atomic_store(&r->synced, true);
	}
	if (inf->handlers_tail != NULL)
		inf->handlers_tail->next = r;
	else
		inf->handlers = r;
	inf->handlers_tail = r;
	rearm(inf);
	return r;
}

ck_cache_handler_reg_t *ck_cache_informer_add_handler(ck_cache_informer_t *inf,
                                                      const ck_cache_handler_t *h, void *ud)
{
	return ck_cache_informer_add_handler_resync(inf, h, ud, inf->default_resync_ms);
}

void ck_cache_informer_remove_handler(ck_cache_informer_t *inf, ck_cache_handler_reg_t *reg)
{
	if (reg == NULL || reg->removed)
		return;
	reg->removed = true;
	if (reg->catching_up) {
		reg->catching_up = false;
		inf->ncatching--;
	}
	if (inf->dispatching > 0)
		inf->need_sweep = true;
	else
		sweep(inf);
	rearm(inf);
}

bool ck_cache_handler_has_synced(const ck_cache_handler_reg_t *reg)
{
	return atomic_load(&((ck_cache_handler_reg_t *)(uintptr_t)reg)->synced);
}

/* ---------------------------------------------------------------- sync state */

bool ck_cache_informer_has_synced(ck_cache_informer_t *inf)
{
	return atomic_load(&inf->synced);
}

static char *reason_locked(ck_cache_informer_t *inf)
{
	if (atomic_load(&inf->synced))
		return NULL;
	if (atomic_load(&inf->wait_stopped))
		return ck_xasprintf("%s: informer shut down before its cache synced", inf->name);
	if (inf->last_err != NULL)
		return ck_xstrdup(inf->last_err);
	if (!inf->started)
		return ck_xasprintf("%s: informer not started", inf->name);
	return ck_xasprintf("%s: waiting for the initial list (no error so far)", inf->name);
}

char *ck_cache_informer_sync_reason(ck_cache_informer_t *inf)
{
	pthread_mutex_lock(&inf->mu);
	char *r = reason_locked(inf);
	pthread_mutex_unlock(&inf->mu);
	return r;
}

int ck_cache_informer_wait_synced(ck_cache_informer_t *inf, int64_t timeout_ms, char **reason)
{
	if (atomic_load(&inf->synced))
		return 0;
	if (on_loop_thread(inf)) {
		if (reason != NULL)
			*reason = ck_xasprintf("%s: wait for cache sync called on the loop thread, "
			                       "which would deadlock",
			                       inf->name);
		return -1;
	}
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	if (timeout_ms > 0) {
		dl.tv_sec += timeout_ms / 1000;
		dl.tv_nsec += (timeout_ms % 1000) * 1000000L;
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&inf->mu);
	while (!atomic_load(&inf->synced) && !atomic_load(&inf->wait_stopped) && timeout_ms != 0) {
		if (timeout_ms < 0) {
			pthread_cond_wait(&inf->cond, &inf->mu);
		} else if (pthread_cond_timedwait(&inf->cond, &inf->mu, &dl) == ETIMEDOUT) {
			break;
		}
	}
	int result = atomic_load(&inf->synced) ? 0 : -1;
	if (result != 0 && reason != NULL) {
		char *why = reason_locked(inf);
		*reason = ck_xasprintf("cache not synced after %lld ms: %s", (long long)timeout_ms,
		                       why ? why : "unknown");
		free(why);
	}
	pthread_mutex_unlock(&inf->mu);
	return result;
}

/* ---------------------------------------------------------------- accessors */

ck_cache_store_t *ck_cache_informer_store(ck_cache_informer_t *inf)
{
	return inf->store;
}
const ck_type_t *ck_cache_informer_type(const ck_cache_informer_t *inf)
{
	return inf->type;
}
const char *ck_cache_informer_name(const ck_cache_informer_t *inf)
{
	return inf->name;
}

const ck_cache_lister_t *ck_cache_informer_lister(ck_cache_informer_t *inf)
{
	/* NULL for NULL: a refused ck_cache_factory_informer() must not crash here. */
	if (inf == NULL)
		return NULL;
	return cache_lister_from_store(inf->store);
}

/* A part's counters added into the totals. Its shard mode counts as the
 * weakest seen: client-side if any part's server did not filter. */
static void stats_add(cache_reflector_stats_t *to, const cache_reflector_stats_t *p)
{
	to->lists += p->lists;
	to->lists_done += p->lists_done;
	to->relists += p->relists;
	to->watches += p->watches;
	to->watch_restarts += p->watch_restarts;
	to->stalls += p->stalls;
	to->errors += p->errors;
	to->events += p->events;
	to->shard_dropped += p->shard_dropped;
	if (p->last_event_wall_ns > to->last_event_wall_ns)
		to->last_event_wall_ns = p->last_event_wall_ns;
	if (p->shard_mode > to->shard_mode)
		to->shard_mode = p->shard_mode;
}

/* The counters of the reflector, or the sum over the parts and the removed ones. */
static void refl_stats(ck_cache_informer_t *inf, cache_reflector_stats_t *rs)
{
	if (!inf->parted) {
		cache_reflector_stats(inf->refl, rs);
		return;
	}
	pthread_mutex_lock(&inf->mu);
	*rs = inf->parts_gone;
	if (rs->shard_mode < CK_CACHE_SHARD_UNKNOWN)
		rs->shard_mode = CK_CACHE_SHARD_UNKNOWN;
	cache_reflector_stats_t ps;
	if (inf->mrefl != NULL) {
		cache_reflector_stats(inf->mrefl, &ps);
		stats_add(rs, &ps);
	}
	for (size_t i = 0; i < inf->nparts; i++) {
		if (inf->parts[i]->refl == NULL)
			continue;
		cache_reflector_stats(inf->parts[i]->refl, &ps);
		stats_add(rs, &ps);
	}
	/* mrefl's union may cover the whole space and then finds no stray: merged
	 * says what it is. */
	if (inf->merged)
		rs->shard_mode = CK_CACHE_SHARD_CLIENT;
	pthread_mutex_unlock(&inf->mu);
}

void ck_cache_informer_stats(ck_cache_informer_t *inf, ck_cache_stats_t *out)
{
	cache_reflector_stats_t rs;
	refl_stats(inf, &rs);
	memset(out, 0, sizeof(*out));
	out->objects = ck_cache_store_len(inf->store);
	out->lists = rs.lists;
	out->relists = rs.relists;
	out->watch_restarts = rs.watch_restarts;
	out->watch_stalls = rs.stalls;
	out->errors = rs.errors;
	out->events = rs.events;
	out->deltas = atomic_load(&inf->n_deltas);
	out->last_event_wall_ns = rs.last_event_wall_ns;
	out->synced = atomic_load(&inf->synced);
	cache_check_stats_t cs;
	cache_check_stats(inf->consistency, &cs);
	out->consistency_checks = cs.checks;
	out->consistency_skipped = cs.skipped;
	out->consistency_divergent = cs.divergent_checks;
	out->consistency_last_diff = cs.last_divergent;
	out->shard_mode = rs.shard_mode;
	out->shard_dropped = rs.shard_dropped;
}

cache_check_t *cache_informer_check(ck_cache_informer_t *inf)
{
	return inf->consistency;
}

/* ---------------------------------------------------------------- test hooks */

void cache_informer_tick(ck_cache_informer_t *inf)
{
	tick(inf);
}

void cache_informer_drain(ck_cache_informer_t *inf)
{
	note_loop_thread(inf);
	do
		process(inf, SIZE_MAX);
	while (!inf->stopped && inf->started && cache_informer_pending(inf) > 0);
}

size_t cache_informer_pending(ck_cache_informer_t *inf)
{
	size_t n = cache_dq_len(&inf->dq);
	if (inf->cur.active)
		n +=
		    (inf->cur.n - inf->cur.built) + inf->cur.gone.n + inf->cur.n - inf->cur.pos + 1;
	for (ck_cache_handler_reg_t *r = inf->handlers; r != NULL; r = r->next)
		if (!r->removed && r->catching_up)
			n += r->snap.n - r->snap_pos + r->bl_n - r->bl_pos + 1;
	return n;
}

cache_reflector_t *cache_informer_reflector(ck_cache_informer_t *inf)
{
	return inf->refl;
}

cache_reflector_t *cache_informer_part_reflector(ck_cache_informer_t *inf, uint32_t id)
{
	size_t i = part_index(inf, id);
	return i == SIZE_MAX ? NULL : inf->parts[i]->refl;
}

/* ---------------------------------------------------------------- parts API */

/* Starts part p's own reflector (listing only its range). Loop thread. */
static void part_start(ck_cache_informer_t *inf, inf_part_t *p)
{
	ck_shard_selector_t *sel = ck_shard_selector_new(inf->part_field, &p->range, 1, NULL);
	cache_reflector_opts_t ro = inf->part_ro;
	ro.shard = sel;
	cache_reflector_t *r = cache_reflector_new(inf->part_lw, inf->clk, &ro, &part_sink, p);
	CK_LOG_V(2, "Listing a part of the cache", CK_KV_STR("resource", inf->name),
	         CK_KV_UINT("part", p->id),
	         CK_KV_STR("shardSelector", ck_shard_selector_string(sel)));
	ck_shard_selector_free(sel);
	pthread_mutex_lock(&inf->mu);
	p->refl = r;
	pthread_mutex_unlock(&inf->mu);
	if (inf->started) {
		cache_reflector_start(r);
		rearm(inf);
	}
}

/* Stops and frees *rp (a part's or mrefl), its counters kept in the totals. */
static void refl_retire(ck_cache_informer_t *inf, cache_reflector_t **rp, bool keep_mode)
{
	cache_reflector_t *r = *rp;
	if (r == NULL)
		return;
	cache_reflector_stop(r);
	cache_reflector_stats_t ps;
	cache_reflector_stats(r, &ps);
	if (!keep_mode)
		ps.shard_mode = CK_CACHE_SHARD_NONE;
	pthread_mutex_lock(&inf->mu);
	stats_add(&inf->parts_gone, &ps);
	*rp = NULL;
	pthread_mutex_unlock(&inf->mu);
	cache_reflector_free(r);
}

/* (Re)makes mrefl over every part's range, with a new tag: its list replaces the
 * store, and queued lists of the one before are dropped. Loop thread. */
static void remake(ck_cache_informer_t *inf)
{
	inf->mremake_ns = 0;
	refl_retire(inf, &inf->mrefl, true);
	inf->mtag = 0;
	if (inf->nparts == 0 || inf->stopped)
		return;
	ck_shard_range_t *rs = ck_xcalloc(inf->nparts, sizeof(*rs));
	for (size_t i = 0; i < inf->nparts; i++)
		rs[i] = inf->parts[i]->range;
	ck_shard_selector_t *sel = ck_shard_selector_new(inf->part_field, rs, inf->nparts, NULL);
	free(rs);
	cache_reflector_opts_t ro = inf->part_ro;
	ro.shard = sel;
	cache_reflector_t *r = cache_reflector_new(inf->part_lw, inf->clk, &ro, &merged_sink, inf);
	ck_shard_selector_free(sel);
	inf->mtag = new_tag(inf);
	pthread_mutex_lock(&inf->mu);
	inf->mrefl = r;
	pthread_mutex_unlock(&inf->mu);
	CK_LOG_V(2, "Listing the merged parts of the cache", CK_KV_STR("resource", inf->name),
	         CK_KV_UINT("parts", inf->nparts));
	if (inf->started) {
		cache_reflector_start(r);
		rearm(inf);
	}
}

/* Whether a part has a reflector of its own. */
static bool any_part_listing(const ck_cache_informer_t *inf)
{
	for (size_t i = 0; i < inf->nparts; i++)
		if (inf->parts[i]->refl != NULL)
			return true;
	return false;
}

/* A part's list is in, or one met a stray: merge the parts if the server sent
 * what it should have filtered, else start the parts that waited for the probe. */
static void settle(ck_cache_informer_t *inf)
{
	inf->settle_due = false;
	if (inf->merged || inf->stopped)
		return;
	bool client = false, listed = false;
	for (size_t i = 0; i < inf->nparts; i++) {
		inf_part_t *p = inf->parts[i];
		if (p->refl != NULL && cache_reflector_shard_mode(p->refl) == CK_CACHE_SHARD_CLIENT)
			client = true;
		listed = listed || atomic_load(&p->synced);
	}
	if (client) {
		CK_LOG_INFO("Shard parts merged into one list and watch: the server does not "
		            "filter by shard selector, so each part's would carry everything",
		            CK_KV_STR("resource", inf->name), CK_KV_UINT("parts", inf->nparts));
		inf->merged = true;
		for (size_t i = 0; i < inf->nparts; i++)
			refl_retire(inf, &inf->parts[i]->refl, true);
		remake(inf);
		return;
	}
	if (inf->probed || !listed)
		return;
	inf->probed = true;
	for (size_t i = 0; i < inf->nparts; i++)
		if (inf->parts[i]->refl == NULL)
			part_start(inf, inf->parts[i]);
}

int ck_cache_informer_add_part(ck_cache_informer_t *inf, uint32_t id, ck_shard_range_t range,
                               char **err)
{
	if (!inf->parted)
		return ck_err_set(err, "cache: informer %s: add part %u: not made with shard_parts",
		                  inf->name, id);
	if (inf->stopped)
		return ck_err_set(err, "cache: informer %s: add part %u: after shutdown", inf->name,
		                  id);
	if (inf->processing > 0)
		return ck_err_set(err, "cache: informer %s: add part %u: from a handler", inf->name,
		                  id);
	if (part_index(inf, id) != SIZE_MAX)
		return ck_err_set(err, "cache: informer %s: add part %u: already a part", inf->name,
		                  id);
	ck_shard_selector_t *check = ck_shard_selector_new(inf->part_field, &range, 1, err);
	if (check == NULL)
		return -1;
	ck_shard_selector_free(check);
	inf_part_t *p = ck_xcalloc(1, sizeof(*p));
	p->inf = inf;
	p->id = id;
	p->range = range;
	p->tag = new_tag(inf);
	pthread_mutex_lock(&inf->mu);
	inf->parts = ck_xrealloc(inf->parts, (inf->nparts + 1) * sizeof(*inf->parts));
	inf->parts[inf->nparts++] = p;
	pthread_mutex_unlock(&inf->mu);
	if (inf->merged) {
		/* mrefl's list would not hold this part: its lists are void from now, and
		 * one remake serves the parts added in a burst (a replica takes its buckets
		 * one by one). */
		refl_retire(inf, &inf->mrefl, true);
		inf->mtag = 0;
		uint64_t now = ck_clk_mono_ns(inf->clk);
		if (inf->mremake_ns == 0)
			inf->mremake_first_ns = now;
		inf->mremake_ns = now + CACHE_MERGED_REMAKE_DELAY_NS;
		if (inf->mremake_ns > inf->mremake_first_ns + CACHE_MERGED_REMAKE_MAX_NS)
			inf->mremake_ns = inf->mremake_first_ns + CACHE_MERGED_REMAKE_MAX_NS;
		rearm(inf);
	} else if (inf->probed || !any_part_listing(inf)) {
		part_start(inf, p); /* the probe, or the server is known to filter */
	} else {
		CK_LOG_V(2, "A part of the cache waits for the first part's list",
		         CK_KV_STR("resource", inf->name), CK_KV_UINT("part", id));
	}
	return 0;
}

/* Drops every object in range from the store, telling nobody. */
static void drop_range(ck_cache_informer_t *inf, ck_shard_range_t range)
{
	ck_cache_objs_t all;
	cache_store_list_nolock(inf->store, &all);
	for (size_t i = 0; i < all.n; i++)
		if (ck_shard_range_contains(range,
		                            ck_shard_obj_hash(inf->part_field, all.items[i])))
			ck_obj_unref(cache_store_delete_obj(inf->store, all.items[i]));
	ck_cache_objs_free(&all);
}

void ck_cache_informer_remove_part(ck_cache_informer_t *inf, uint32_t id)
{
	size_t i = inf->parted && inf->processing == 0 ? part_index(inf, id) : SIZE_MAX;
	if (i == SIZE_MAX)
		return;
	inf_part_t *p = inf->parts[i];
	if (p->refl != NULL)
		cache_reflector_stop(p->refl);
	/* Its list half built or half told: the rest is no longer ours to tell. */
	if (inf->cur.active && inf->cur.part == p->tag) {
		compound_free(&inf->cur);
		cache_dq_done(&inf->dq);
	}
	refl_retire(inf, &p->refl, false);
	pthread_mutex_lock(&inf->mu);
	inf->parts[i] = inf->parts[--inf->nparts];
	pthread_mutex_unlock(&inf->mu);
	if (inf->cur.active && inf->cur.repl != NULL)
		inf->part_gone_in_build = true;
	/* Merged, mrefl goes on over the old union: what it brings of this range is
	 * dropped here (in_parts). With no part left, nothing is to be watched. */
	if (inf->merged && inf->nparts == 0) {
		refl_retire(inf, &inf->mrefl, true);
		inf->mtag = 0;
		inf->mremake_ns = 0;
	}
	/* The probe gone before its list: the next part probes. */
	if (!inf->merged && !inf->probed && inf->nparts > 0 && !any_part_listing(inf))
		part_start(inf, inf->parts[0]);
	drop_range(inf, p->range);
	CK_LOG_V(2, "Removed a part from the cache", CK_KV_STR("resource", inf->name),
	         CK_KV_UINT("part", id), CK_KV_UINT("objects", ck_cache_store_len(inf->store)));
	free(p);
	rearm(inf);
}

bool ck_cache_informer_part_synced(ck_cache_informer_t *inf, uint32_t id)
{
	pthread_mutex_lock(&inf->mu);
	size_t i = inf->parted ? part_index(inf, id) : SIZE_MAX;
	bool synced = i != SIZE_MAX && atomic_load(&inf->parts[i]->synced);
	pthread_mutex_unlock(&inf->mu);
	return synced;
}

/* ---------------------------------------------------------------- last sync rv */

/*
 * The reflector's resourceVersion lives on the loop thread (it moves on every
 * event and bookmark, which do not all reach the sink); process() runs after
 * every poll, so copying it here keeps other threads at most one loop
 * iteration behind. Loop thread: it alone writes last_sync_rv, so it may read
 * it without the lock.
 */
/* The reflector's last resourceVersion; with parts, the first part's (each part
 * has its own; "" with none). Loop thread. */
static const char *refl_last_rv(const ck_cache_informer_t *inf)
{
	if (!inf->parted)
		return cache_reflector_last_rv(inf->refl);
	if (inf->mrefl != NULL)
		return cache_reflector_last_rv(inf->mrefl);
	return inf->nparts > 0 && inf->parts[0]->refl != NULL
	           ? cache_reflector_last_rv(inf->parts[0]->refl)
	           : "";
}

static void note_last_sync_rv(ck_cache_informer_t *inf)
{
	const char *rv = refl_last_rv(inf);
	if (inf->last_sync_rv != NULL && strcmp(inf->last_sync_rv, rv) == 0)
		return;
	char *copy = ck_xstrdup(rv);
	pthread_mutex_lock(&inf->mu);
	char *old = inf->last_sync_rv;
	inf->last_sync_rv = copy;
	pthread_mutex_unlock(&inf->mu);
	free(old);
}

char *ck_cache_informer_last_sync_resource_version(ck_cache_informer_t *inf)
{
	/* On the loop thread the reflector's own value is exact (the copy may lag). */
	if (on_loop_thread(inf))
		return ck_xstrdup(refl_last_rv(inf));
	pthread_mutex_lock(&inf->mu);
	char *rv = ck_xstrdup(inf->last_sync_rv ? inf->last_sync_rv : "");
	pthread_mutex_unlock(&inf->mu);
	return rv;
}
