# c-sample-controller: client-go's controller machinery in C, and sample-controller on it.
#
#   make            build lib/libckube.a and bin/sample-controller (warnings are errors)
#   make test       everything CI runs: deps, build, unit tests (ASan+UBSan, TSan for
#                   the threaded modules), envtest-test, e2e tests on a real local
#                   control plane
#   make run        local control plane (unless KUBECONFIG is set) + CRD + example Foo
#                   + the controller in the foreground
#   make libcheck   the installed library: symbols, headers, pkg-config builds, examples
#   make fuzz-smoke every libFuzzer target for FUZZ_SECONDS (30) each (make test: 5)
#   make fuzz       every libFuzzer target for FUZZ_LONG_SECONDS (600) each
#   make unit       unit tests only;  make e2e  e2e tests only
#   make examples-test   the examples' own unit tests (examples/<name>/<name>_test.c, ASan)
#   make envtest-test   <ckube/envtest.h> and ckube-envtest on real servers, as nobody
#   make soak       minutes of churn on daemons under valgrind and TSan (not in test)
#   make chaos      CHAOS_SECONDS (1200) of faults on two daemons, CHAOS_FOOS (5000); one table
#   make bench      benchmarks (print figures)
#   make lint       clang-format check + cppcheck + generated code up to date + depcheck
#   make depcheck   every #include in pkg/ and include/ckube/ points down the layering
#                   (hack/depcheck.sh states the order)
#   make generate   regenerate api/ from deploy/crd.yaml with ckube-gen (commit the result)
#   make verify-generate   fail when the committed api/ differs from what ckube-gen writes
#   make cluster-up / cluster-down     the local control plane alone
#   make image      container images with buildah, no registry (hack/image.sh): build/image/*.oci.tar
#   make node-up / node-down           a real kubelet node (containerd, runc, CNI) joined
#                   to it, with the image imported (root; undoes all it changed)
#   make install    PREFIX=/usr/local DESTDIR=: libckube.so/.a, include/ckube/, ckube.pc
#   make clean

CC      ?= cc
PKGS    := libcurl yajl yaml-0.1 libev libmicrohttpd gnutls
# libev ships no .pc file on Debian; fall back to -lev.
PKG_CFLAGS = $(shell pkg-config --cflags $(filter-out libev,$(PKGS)) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(filter-out libev,$(PKGS)) 2>/dev/null) -lev
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null)
# The release image's link (Dockerfile): STATIC_DEPS=<prefix> where hack/static-deps.sh
# installed trimmed static libcurl, nghttp2, OpenSSL and GnuTLS. Their headers come
# first, every library is linked statically (Debian's own archives for the rest),
# unused sections are dropped and relative relocations packed (DT_RELR: the linked-in
# libraries' 460 KB of .rela.dyn, read at every start, become 6 KB): only glibc stays
# shared. The installed library and every other build keep Debian's shared libraries.
ifneq ($(STATIC_DEPS),)
PKG_CFLAGS = -I$(STATIC_DEPS)/include
# (Archives in the order of their references: libmicrohttpd's GnuTLS calls are
# resolved by the libgnutls.a after it.)
PKG_LIBS   = -Wl,--gc-sections -Wl,-z,pack-relative-relocs \
             $(addprefix $(STATIC_DEPS)/lib/lib,curl.a nghttp2.a ssl.a crypto.a) \
             -Wl,-Bstatic -lz -lyajl_s -lyaml -lmicrohttpd $(STATIC_DEPS)/lib/libgnutls.a \
             -lhogweed -lnettle -lgmp -ltasn1 -lev -Wl,-Bdynamic
endif

VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
WARN    := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wstrict-prototypes -Wmissing-prototypes
BASEFLAGS := -std=c11 -D_GNU_SOURCE -DCSC_VERSION=\"$(VERSION)\" -Iinclude -I. $(WARN) -pthread -g
CFLAGS  ?= -O2
# Release builds are hardened as Debian's dpkg-buildflags harden packages: stack
# protector, fortified libc calls (needs optimisation: CFLAGS=-O0 drops it), full
# RELRO with immediate binding. make libcheck checks each binary for them.
HARDEN_CFLAGS := -fstack-protector-strong $(if $(filter -O0,$(CFLAGS)),,-U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2)
HARDEN_LDFLAGS := -Wl,-z,relro,-z,now
ASAN_FLAGS := -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
TSAN_FLAGS := -O1 -fsanitize=thread

# While developing one module, restrict what is compiled:
#   make unit B=build-wq MODULES="base workqueue" SUITES="workqueue"
MODULES ?= $(notdir $(wildcard pkg/*))
SUITES  ?= $(patsubst tests/unit/test_%.c,%,$(wildcard tests/unit/test_*.c))
LIB_SRCS  := $(sort $(foreach m,$(MODULES),$(wildcard pkg/$(m)/*.c)))
# The Foo kind is sample-controller's, not the library's: it is built with cmd/.
API_SRCS  := $(sort $(wildcard api/*/*/*.c))
CMD_SRCS  := $(sort $(wildcard cmd/sample-controller/*.c)) $(API_SRCS)
UNIT_SRCS := $(sort $(foreach s,$(SUITES),tests/unit/test_$(s).c))
TOOL_SRCS := $(sort $(wildcard tests/tools/*.c))
GEN_SRCS  := $(sort $(wildcard cmd/ckube-gen/*.c))
BENCH_SRCS := $(sort $(wildcard bench/*.c))

B := build
REL_OBJS  := $(LIB_SRCS:%.c=$(B)/rel/%.o)
ASAN_OBJS := $(LIB_SRCS:%.c=$(B)/asan/%.o)
TSAN_OBJS := $(LIB_SRCS:%.c=$(B)/tsan/%.o)

GENERATE_PHONY := generate verify-generate
.PHONY: FORCE all deps image install examples-test envtest-test $(GENERATE_PHONY) libcheck depcheck shcheck fuzz fuzz-smoke test test-steps unit re2-diff unit-tsan integration e2e soak chaos run bench lint fmt clean cluster-up cluster-down node-up node-down k8s-bins

all: lib/libckube.a lib/libckube.so.$(VERSION) bin/ckube-gen bin/ckube-envtest bin/sample-controller $(TOOL_SRCS:tests/tools/%.c=bin/%)

deps:
	@bash hack/install-deps.sh

k8s-bins: deps
	@bash hack/build-k8s.sh >/dev/null

$(B)/rel/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(HARDEN_CFLAGS) $(EXTRA_CFLAGS) $(PKG_CFLAGS) -MMD -MP -c $< -o $@

$(B)/asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(ASAN_FLAGS) $(PKG_CFLAGS) -MMD -MP -c $< -o $@

$(B)/tsan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(TSAN_FLAGS) $(PKG_CFLAGS) -MMD -MP -c $< -o $@

# ---- The library: libckube.so.<VERSION> (soname libckube.so.<MAJOR>) and
# libckube.a. Its objects are position-independent and hide everything but
# CKUBE_API; the archive holds one prelinked object whose hidden symbols are made
# local, so that static linking exposes exactly the API too (a program may define
# its own fatal() or chash_find()).
MAJOR   := $(firstword $(subst ., ,$(VERSION)))
SONAME  := libckube.so.$(MAJOR)
$(REL_OBJS): EXTRA_CFLAGS = -fPIC -fvisibility=hidden

$(B)/rel/libckube.o: $(REL_OBJS)
	ld -r -o $@.tmp $^
	objcopy --localize-hidden $@.tmp $@
	rm -f $@.tmp

lib/libckube.a: $(B)/rel/libckube.o
	@mkdir -p lib
	rm -f $@ && ar rcs $@ $^

lib/libckube.so.$(VERSION): $(REL_OBJS)
	@mkdir -p lib
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--no-undefined $(HARDEN_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm -pthread
	ln -sf libckube.so.$(VERSION) lib/$(SONAME)
	ln -sf $(SONAME) lib/libckube.so

# pkg-config files: ckube.pc (shared; --static adds the private dependencies) and,
# as libuv does, ckube-static.pc that names the archive itself.
PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
# The public headers need none of the dependencies' headers, so the dependencies
# are plain -l flags: `--static` then links libckube.a against the system's shared
# libcurl etc. without asking for their own static archives.
PC_LIBS    := -lcurl -lyajl -lyaml -lmicrohttpd -lgnutls -lev -lm -pthread
$(B)/ckube.pc $(B)/ckube-static.pc: VERSION Makefile
	@mkdir -p $(B)
	@{ echo "prefix=$(PREFIX)"; echo "libdir=$(LIBDIR)"; echo "includedir=$(INCLUDEDIR)"; echo; \
	   echo "Name: ckube"; \
	   echo "Description: client-go's controller machinery in C: config, REST client, informers, listers, workqueue, events, leader election"; \
	   echo "Version: $(VERSION)"; \
	   if [ $(@F) = ckube.pc ]; then echo 'Libs: -L$${libdir} -lckube'; else echo 'Libs: $${libdir}/libckube.a'; fi; \
	   echo "Libs.private: $(PC_LIBS)"; echo 'Cflags: -I$${includedir} -pthread'; } >$@

# make install [PREFIX=/usr/local] [DESTDIR=...]
BINDIR     ?= $(PREFIX)/bin
# ckube-envtest assets runs the installed share/ckube/build-k8s.sh (versions.env beside it).
DATADIR    ?= $(PREFIX)/share
install: lib/libckube.a lib/libckube.so.$(VERSION) $(B)/ckube.pc $(B)/ckube-static.pc bin/ckube-gen bin/ckube-envtest
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)/ckube $(DESTDIR)$(BINDIR) $(DESTDIR)$(DATADIR)/ckube
	install -m 755 bin/ckube-gen bin/ckube-envtest $(DESTDIR)$(BINDIR)/
	install -m 644 hack/build-k8s.sh hack/versions.env $(DESTDIR)$(DATADIR)/ckube/
	install -m 644 include/ckube/*.h $(DESTDIR)$(INCLUDEDIR)/ckube/
	install -m 644 lib/libckube.a $(DESTDIR)$(LIBDIR)/
	install -m 755 lib/libckube.so.$(VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libckube.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libckube.so
	install -m 644 $(B)/ckube.pc $(B)/ckube-static.pc $(DESTDIR)$(LIBDIR)/pkgconfig/

# The daemon uses only the library's API: it links the archive, not the objects.
bin/sample-controller: $(CMD_SRCS:%.c=$(B)/rel/%.o) lib/libckube.a
	@mkdir -p bin
	$(CC) $(BASEFLAGS) $(CFLAGS) $(HARDEN_LDFLAGS) -o $@ $(filter %.o,$^) lib/libckube.a $(PKG_LIBS) -lm

# ckube-envtest, a test's etcd and kube-apiserver for shell scripts (installed too).
bin/ckube-envtest: $(B)/rel/cmd/ckube-envtest/main.o lib/libckube.a
	@mkdir -p bin
	$(CC) $(BASEFLAGS) $(CFLAGS) $(HARDEN_LDFLAGS) -o $@ $(filter %.o,$^) lib/libckube.a $(PKG_LIBS) -lm

# ckube-gen, the generator of typed kinds from a CRD (installed with the library).
bin/ckube-gen: $(GEN_SRCS:%.c=$(B)/rel/%.o) lib/libckube.a
	@mkdir -p bin
	$(CC) $(BASEFLAGS) $(CFLAGS) $(HARDEN_LDFLAGS) -o $@ $(filter %.o,$^) lib/libckube.a $(PKG_LIBS) -lm

# The Foo kind is generated from the CRD and committed, as Go's code-generator
# output is; make test fails when it is stale (as verify-codegen does).
generate: bin/ckube-gen
	bin/ckube-gen -o api/samplecontroller deploy/crd.yaml

verify-generate: bin/ckube-gen
	@bin/ckube-gen --check -o api/samplecontroller deploy/crd.yaml && \
		echo "  ok    generated code (api/samplecontroller) matches deploy/crd.yaml"

bin/%: $(B)/rel/tests/tools/%.o lib/libckube.a
	@mkdir -p bin
	$(CC) $(BASEFLAGS) $(CFLAGS) $(HARDEN_LDFLAGS) -o $@ $< lib/libckube.a $(PKG_LIBS) -lm

# Asan build of the daemon, used by the e2e tests so that they run sanitized too.
$(B)/asan/sample-controller: $(CMD_SRCS:%.c=$(B)/asan/%.o) $(ASAN_OBJS)
	$(CC) $(BASEFLAGS) $(ASAN_FLAGS) -o $@ $^ $(PKG_LIBS) -lm

# The unit runner: every tests/unit/test_<x>.c defines `Suite *suite_<x>(void)`.
# Regenerated on every run (FORCE) but rewritten only when the suite list changed,
# so a different SUITES= never runs a stale list.
$(B)/suites.h: FORCE
	@mkdir -p $(B)
	@for f in $(UNIT_SRCS); do n=$$(basename $$f .c); echo "SUITE($${n#test_})"; done > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
FORCE:

# The daemon's reconcile logic (controller.c, not main.c) is unit-tested too, and so
# is ckube-gen's reading and writing (all but its main.c).
UNIT_CMD_SRCS := $(filter-out %/main.c,$(CMD_SRCS)) $(filter-out %/main.c,$(GEN_SRCS))
# Generated code under test: tests/unit/crd/widget.yaml, a CRD using every schema
# feature, generated at build time into $(UNIT_GEN)/<version>/widget.{h,c}, which
# test_gen.c includes; its sources are compiled into the runner with the sanitizers.
UNIT_GEN := $(B)/gen/tests/widget
$(UNIT_GEN)/stamp: tests/unit/crd/widget.yaml bin/ckube-gen
	rm -rf $(UNIT_GEN) && bin/ckube-gen -o $(UNIT_GEN) $< && touch $@
$(B)/asan/tests/unit/test_gen.o $(B)/tsan/tests/unit/test_gen.o: $(UNIT_GEN)/stamp
$(B)/asan/tests/unit/test_gen.o $(B)/tsan/tests/unit/test_gen.o: BASEFLAGS += -I$(UNIT_GEN)
$(B)/asan/unit-tests: $(UNIT_SRCS:%.c=$(B)/asan/%.o) $(B)/asan/tests/unit/main.o $(ASAN_OBJS) $(UNIT_CMD_SRCS:%.c=$(B)/asan/%.o)
	$(CC) $(BASEFLAGS) $(ASAN_FLAGS) $(PKG_CFLAGS) -I$(UNIT_GEN) -o $@ $^ \
		$(if $(filter %/test_gen.c,$(UNIT_SRCS)),$(wildcard $(UNIT_GEN)/*/*.c)) $(PKG_LIBS) $(CHECK_LIBS) -lm

$(B)/tsan/unit-tests: $(UNIT_SRCS:%.c=$(B)/tsan/%.o) $(B)/tsan/tests/unit/main.o $(TSAN_OBJS) $(UNIT_CMD_SRCS:%.c=$(B)/tsan/%.o)
	$(CC) $(BASEFLAGS) $(TSAN_FLAGS) $(PKG_CFLAGS) -I$(UNIT_GEN) -o $@ $^ \
		$(if $(filter %/test_gen.c,$(UNIT_SRCS)),$(wildcard $(UNIT_GEN)/*/*.c)) $(PKG_LIBS) $(CHECK_LIBS) -lm

# Integration suites (tests/integration/test_<x>.c) talk to the real local control
# plane named by $KUBECONFIG; same runner, their own suite list.
INTEG_SUITES ?= $(patsubst tests/integration/test_%.c,%,$(wildcard tests/integration/test_*.c))
INTEG_SRCS := $(sort $(foreach s,$(INTEG_SUITES),tests/integration/test_$(s).c))
$(B)/integ/suites.h: FORCE
	@mkdir -p $(B)/integ
	@for f in $(INTEG_SRCS); do n=$$(basename $$f .c); echo "SUITE($${n#test_})"; done > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@

$(B)/integ/main.o: tests/unit/main.c $(B)/integ/suites.h
	$(CC) $(BASEFLAGS) -I$(B)/integ $(ASAN_FLAGS) $(PKG_CFLAGS) -c $< -o $@

$(B)/asan/integration-tests: $(INTEG_SRCS:%.c=$(B)/asan/%.o) $(B)/integ/main.o $(ASAN_OBJS) $(API_SRCS:%.c=$(B)/asan/%.o)
	$(CC) $(BASEFLAGS) $(ASAN_FLAGS) -o $@ $^ $(PKG_LIBS) $(CHECK_LIBS) -lm

# make integration KUBECONFIG=.local/kubeconfig [INTEG_SUITES="client"]
integration: $(B)/asan/integration-tests
	cd tests/integration && CK_DEFAULT_TIMEOUT=300 $(abspath $(B))/asan/integration-tests

# envtest (<ckube/envtest.h>, ckube-envtest) against the real etcd and kube-apiserver,
# as an unprivileged user (nobody, when run as root): start/stop, a Foo through a
# client, bad input (missing binary, port in use, CRDs that fail), cleanup after a
# kill -9, sample-controller (the ASan build) on it; prints the cold and warm start
# times (tests/envtest/run.sh).
$(B)/asan/envtest-test: $(B)/asan/tests/envtest/envtest_test.o $(ASAN_OBJS)
	$(CC) $(BASEFLAGS) $(ASAN_FLAGS) -o $@ $^ $(PKG_LIBS) -lm
# The shard selectors against the server with and without ShardedListAndWatch.
$(B)/asan/shard-test: $(B)/asan/tests/envtest/shard_test.o $(ASAN_OBJS)
	$(CC) $(BASEFLAGS) $(ASAN_FLAGS) -o $@ $^ $(PKG_LIBS) -lm
# Replicas splitting buckets on Leases (<ckube/sharding.h>): join, stop, kill.
$(B)/asan/sharding-test: $(B)/asan/tests/envtest/sharding_test.o $(ASAN_OBJS)
	$(CC) $(BASEFLAGS) $(ASAN_FLAGS) -o $@ $^ $(PKG_LIBS) -lm
envtest-test: deps $(B)/asan/envtest-test $(B)/asan/shard-test $(B)/asan/sharding-test bin/ckube-envtest $(B)/asan/sample-controller $(B)/tsan/sample-controller
	ENVTEST_TEST=$(abspath $(B))/asan/envtest-test SHARD_TEST=$(abspath $(B))/asan/shard-test SHARDING_TEST=$(abspath $(B))/asan/sharding-test SAMPLE_CONTROLLER=$(abspath $(B))/asan/sample-controller \
		SAMPLE_CONTROLLER_TSAN=$(abspath $(B))/tsan/sample-controller \
		EXAMPLE_ENVTESTS="$(foreach e,$(EXAMPLE_ENVTESTS),$(e)=$(abspath $(B))/asan/examples-envtest/$(e))" \
		bash tests/envtest/run.sh

$(B)/asan/tests/unit/main.o $(B)/tsan/tests/unit/main.o: $(B)/suites.h
$(B)/asan/tests/unit/main.o $(B)/tsan/tests/unit/main.o: BASEFLAGS += -I$(B)

unit: deps $(B)/asan/unit-tests
	cd tests/unit && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
		CK_DEFAULT_TIMEOUT=60 $(abspath $(B))/asan/unit-tests

# ckube-gen's pattern translation against Go's regexp, which the API server checks
# patterns with: random patterns and strings, each pair matched by the library as
# generated validation matches (tests/re2/run.sh; RE2_SEEDS, RE2_PATTERNS).
$(B)/asan/re2-diff: $(B)/asan/tests/re2/diff.o $(B)/asan/cmd/ckube-gen/pattern.o $(ASAN_OBJS)
	$(CC) $(BASEFLAGS) $(ASAN_FLAGS) -o $@ $^ $(PKG_LIBS) -lm
re2-diff: deps $(B)/asan/re2-diff
	ASAN_OPTIONS=detect_leaks=1 bash tests/re2/run.sh $(abspath $(B))/asan/re2-diff

# Threaded modules again under ThreadSanitizer.
TSAN_SUITES ?= workqueue workqueue_priority record record_stream log metrics leaderelection sharding client cache_store cache_informer cache_fifo gen fake envtest controller
unit-tsan: deps $(B)/tsan/unit-tests
	cd tests/unit && TSAN_OPTIONS=halt_on_error=1 CK_FORK=no CK_DEFAULT_TIMEOUT=120 \
		CK_RUN_SUITES="$(TSAN_SUITES)" $(abspath $(B))/tsan/unit-tests

# The examples/ controllers: each examples/<name>/main.c with the other .c files
# beside it but its tests (*_test.c), ASan build for the e2e tests
# (tests/lib/run.sh builds them again from the installed library).
# An example with a crd.yaml has its kind generated at build time by ckube-gen into
# $(B)/gen/examples/<name>/<version>/, which its sources include.
EXAMPLES := $(patsubst examples/%/main.c,%,$(wildcard examples/*/main.c))
EXAMPLES_CRD := $(patsubst examples/%/crd.yaml,%,$(wildcard examples/*/crd.yaml))
example_objs = $(patsubst %.c,$(B)/asan/%.o,$(filter-out %_test.c,$(wildcard examples/$(1)/*.c)))
$(B)/gen/examples/%/stamp: examples/%/crd.yaml bin/ckube-gen
	rm -rf $(dir $@) && bin/ckube-gen -o $(dir $@) $< && touch $@
$(foreach e,$(EXAMPLES_CRD),$(foreach o,$(call example_objs,$(e)) $(patsubst %.c,$(B)/asan/%.o,$(wildcard examples/$(e)/*_test.c)),\
	$(eval $(o): $(B)/gen/examples/$(e)/stamp)$(eval $(o): BASEFLAGS += -I$(B)/gen/examples/$(e))))
$(foreach e,$(EXAMPLES),$(eval $(B)/asan/bin/$(e): $(call example_objs,$(e))))
$(B)/asan/bin/%: $(ASAN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(ASAN_FLAGS) $(PKG_CFLAGS) -I$(B)/gen/examples/$* -o $@ $^ \
		$(wildcard $(B)/gen/examples/$*/*/*.c) $(PKG_LIBS) -lm

# The examples' own tests, as their users write them: examples/<name>/<name>_test.c,
# a check program of its own (main included) linked with the example's sources but
# main.c, run under ASan+UBSan from the example's directory. tests/lib/run.sh builds
# and runs them again against the installed library only.
EXAMPLE_TESTS := $(foreach d,$(patsubst %/,%,$(wildcard examples/*/)),\
	$(if $(wildcard $(d)/$(notdir $(d))_test.c),$(notdir $(d))))
$(foreach e,$(EXAMPLE_TESTS),$(eval $(B)/asan/examples-test/$(e): $(B)/asan/examples/$(e)/$(e)_test.o \
	$(filter-out %/main.o,$(call example_objs,$(e)))))
# One link for both kinds of example test: its objects, the library's, the example's
# generated kind and check.
define link_example_test
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(ASAN_FLAGS) $(PKG_CFLAGS) -I$(B)/gen/examples/$* -o $@ $^ \
		$(wildcard $(B)/gen/examples/$*/*/*.c) $(PKG_LIBS) $(CHECK_LIBS) -lm
endef
$(B)/asan/examples-test/%: $(ASAN_OBJS)
	$(link_example_test)
# An example's envtest-based test, examples/<name>/envtest_test.c, built the same
# way; make envtest-test runs it (tests/envtest/run.sh), as an unprivileged user.
EXAMPLE_ENVTESTS := $(patsubst examples/%/envtest_test.c,%,$(wildcard examples/*/envtest_test.c))
# (Prerequisites are expanded where the rule is read: this list is known only here.)
envtest-test: $(EXAMPLE_ENVTESTS:%=$(B)/asan/examples-envtest/%)
$(foreach e,$(EXAMPLE_ENVTESTS),$(eval $(B)/asan/examples-envtest/$(e): $(B)/asan/examples/$(e)/envtest_test.o \
	$(filter-out %/main.o,$(call example_objs,$(e)))))
$(B)/asan/examples-envtest/%: $(ASAN_OBJS)
	$(link_example_test)
examples-test: deps $(EXAMPLE_TESTS:%=$(B)/asan/examples-test/%)
	@for e in $(EXAMPLE_TESTS); do \
		(cd examples/$$e && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
			$(abspath $(B))/asan/examples-test/$$e) || exit 1; done

e2e: deps all $(B)/asan/sample-controller $(EXAMPLES:%=$(B)/asan/bin/%)
	CSC_TIMES="$(CSC_TIMES)" bash tests/e2e/run.sh

# TSan build of the daemon, for the soak test.
$(B)/tsan/sample-controller: $(CMD_SRCS:%.c=$(B)/tsan/%.o) $(TSAN_OBJS)
	$(CC) $(BASEFLAGS) $(TSAN_FLAGS) -o $@ $^ $(PKG_LIBS) -lm

# Minutes of churn against daemons under valgrind and TSan (SOAK_SECONDS, default 480).
# Chaos at scale (minutes; not in make test): tests/chaos/run.sh, CHAOS_SECONDS/CHAOS_FOOS.
chaos: deps all
	bash tests/chaos/run.sh

soak: deps all $(B)/tsan/sample-controller
	B_TSAN=$(abspath $(B))/tsan bash tests/soak/run.sh

# make test: each step's time goes to $(B)/times.txt (hack/timed.sh; the e2e tests
# add one line each) and the ten slowest are printed at the end, pass or fail.
# Fuzzing here replays every committed seed and fixture, then mutates for
# FUZZ_TEST_SECONDS per target, two targets at a time; `make fuzz` fuzzes long.
TIMES := $(abspath $(B))/times.txt
TIMED := bash hack/timed.sh $(TIMES)
FUZZ_TEST_SECONDS ?= 5
test: deps
	@mkdir -p $(B) && : >$(TIMES)
	@rc=0; $(MAKE) --no-print-directory test-steps || rc=$$?; \
		bash hack/timed.sh --slowest $(TIMES) 10; exit $$rc
test-steps:
	$(TIMED) build $(MAKE) all
	$(TIMED) verify-generate $(MAKE) verify-generate
	$(TIMED) depcheck $(MAKE) --no-print-directory depcheck
	$(TIMED) shcheck $(MAKE) --no-print-directory shcheck
	$(TIMED) libcheck $(MAKE) libcheck
	$(TIMED) fuzz-smoke $(MAKE) -j2 --no-print-directory fuzz-smoke FUZZ_SECONDS=$(FUZZ_TEST_SECONDS) CSC_TIMES=$(TIMES)
	$(TIMED) unit $(MAKE) unit
	$(TIMED) examples-test $(MAKE) examples-test
	$(TIMED) re2-diff $(MAKE) re2-diff
	$(TIMED) unit-tsan $(MAKE) unit-tsan
	$(TIMED) envtest-test $(MAKE) envtest-test
	$(TIMED) e2e $(MAKE) e2e CSC_TIMES=$(TIMES)

# Every libFuzzer target (tests/fuzz/run_fuzz_*.sh) builds and runs for FUZZ_SECONDS
# (default 30) each from its committed seeds (tests/fuzz/seeds/) and the fixtures,
# and a crash, leak or broken invariant fails the build (targets run side by side
# with -j); `make fuzz` runs each for FUZZ_LONG_SECONDS (600); longer runs:
# bash tests/fuzz/run_fuzz_<target>.sh SECONDS.
FUZZ_SECONDS ?= 30
FUZZ_LONG_SECONDS ?= 600
FUZZ_TARGETS = $(patsubst tests/fuzz/run_fuzz_%.sh,%,$(wildcard tests/fuzz/run_fuzz_*.sh))
fuzz-smoke: deps $(FUZZ_TARGETS:%=fuzz-smoke-%)
fuzz-smoke-%:
	@mkdir -p $(B)
	@start=$$(date +%s); bash tests/fuzz/run_fuzz_$*.sh $(FUZZ_SECONDS) >$(B)/fuzz-$*.log 2>&1 && \
		{ echo "  ok    fuzz $* ($$(grep -o 'Done [0-9]* runs' $(B)/fuzz-$*.log), $$(grep -o 'cov: [0-9]* ft: [0-9]*' $(B)/fuzz-$*.log | tail -n 1))"; \
		  [ -z "$(CSC_TIMES)" ] || echo "$$(( $$(date +%s) - start )) fuzz $*" >>"$(CSC_TIMES)"; } || \
		{ echo "  FAIL  fuzz $*"; tail -n 30 $(B)/fuzz-$*.log; exit 1; }
fuzz:
	$(MAKE) -j2 fuzz-smoke FUZZ_SECONDS=$(FUZZ_LONG_SECONDS)

# The library as installed: symbols, install layout, pkg-config builds, examples.
libcheck: all
	B=$(B) bash tests/lib/run.sh

run: deps all
	bash hack/run.sh

bench: deps all
	bash bench/run.sh

cluster-up: deps
	bash hack/local-up.sh

cluster-down:
	bash hack/local-down.sh

image:
	bash hack/image.sh

# Generated files are laid out by ckube-gen, not clang-format.
FMT_SRCS = $(shell for f in $$(git ls-files '*.c' '*.h' 2>/dev/null); do \
	head -n 3 $$f | grep -q 'generated by ckube-gen' || echo $$f; done)
depcheck:
	@bash hack/depcheck.sh --self-test
	bash hack/depcheck.sh

shcheck:
	@bash hack/shcheck.sh --self-test
	bash hack/shcheck.sh

lint: verify-generate depcheck shcheck
	clang-format --dry-run --Werror $(FMT_SRCS)
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
		--inline-suppr --suppress=missingIncludeSystem -Iinclude -I. $(LIB_SRCS) $(CMD_SRCS) $(GEN_SRCS)

fmt:
	clang-format -i $(FMT_SRCS)

clean:
	rm -rf $(B) bin lib

-include $(shell find $(B) -name '*.d' 2>/dev/null)

# Test files define suite_<x>() without a header.
$(B)/asan/tests/% $(B)/tsan/tests/%: BASEFLAGS += -Wno-missing-prototypes

node-up: deps
	bash hack/node-up.sh

node-down:
	bash hack/node-down.sh
