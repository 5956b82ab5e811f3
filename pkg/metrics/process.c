/*
 * The process collector: the standard process_* figures, read from procfs at scrape
 * time. Every file is read whole and parsed with bounds checks; a file that is
 * missing or malformed only drops the figures that come from it.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pkg/metrics/metrics_internal.h"
#include <ckube/metrics.h>

/* Reads <root>/<rel> into *out (a new string, or NULL when it cannot be read). */
static void read_proc(const char *root, const char *rel, char **out)
{
	char *path = ck_xasprintf("%s/%s", root, rel);
	*out = NULL;
	if (ck_file_read_all(path, out, NULL, NULL) != 0)
		*out = NULL;
	free(path);
}

static void gauge(ck_sbuf_t *out, const char *name, const char *help, ck_metrics_type_t type,
                  double v)
{
	ck_metrics_write_header(out, name, help, type);
	ck_metrics_write_sample(out, name, NULL, 0, v);
}

/*
 * Fields of /proc/<pid>/stat after the command name, which is in parentheses and
 * may itself hold spaces and parentheses: so parsing starts after the last ')'.
 */
struct proc_stat {
	unsigned long long utime, stime, starttime, vsize;
	long long rss;
};

static int parse_stat(const char *text, struct proc_stat *st)
{
	const char *p = text ? strrchr(text, ')') : NULL;
	if (p == NULL)
		return -1;
	/* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
	 * cutime cstime priority nice threads itrealvalue starttime vsize rss */
	int n = sscanf(p + 1,
	               " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d "
	               "%*d %llu %llu %lld",
	               &st->utime, &st->stime, &st->starttime, &st->vsize, &st->rss);
	return n == 5 ? 0 : -1;
}

static int parse_btime(const char *text, unsigned long long *btime)
{
	for (const char *p = text; p != NULL && *p; p = strchr(p, '\n')) {
		if (*p == '\n')
			p++;
		if (strncmp(p, "btime ", 6) == 0)
			return sscanf(p + 6, "%llu", btime) == 1 ? 0 : -1;
	}
	return -1;
}

static int parse_max_files(const char *text, double *out)
{
	const char *p = text ? strstr(text, "Max open files") : NULL;
	char soft[32];
	if (p == NULL || sscanf(p + strlen("Max open files"), " %31s", soft) != 1)
		return -1;
	if (strcmp(soft, "unlimited") == 0)
		return -1;
	char *end;
	unsigned long long v = strtoull(soft, &end, 10);
	if (*end != '\0')
		return -1;
	*out = (double)v;
	return 0;
}

static int count_fds(const char *root, double *out)
{
	char *path = ck_xasprintf("%s/self/fd", root);
	DIR *d = opendir(path);
	free(path);
	if (d == NULL)
		return -1;
	double n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	*out = n;
	return 0;
}

static void process_collect(void *ud, ck_sbuf_t *out)
{
	const char *root = ud;
	long ticks = sysconf(_SC_CLK_TCK);
	long page = sysconf(_SC_PAGESIZE);
	char *stat_text, *sys_stat, *limits;
	read_proc(root, "self/stat", &stat_text);
	read_proc(root, "stat", &sys_stat);
	read_proc(root, "self/limits", &limits);
	struct proc_stat st;
	int have_stat = parse_stat(stat_text, &st) == 0 && ticks > 0 && page > 0;
	unsigned long long btime = 0;
	double v;

	/* Sorted by name, as Prometheus' Go client prints them. */
	if (have_stat)
		gauge(out, "process_cpu_seconds_total",
		      "Total user and system CPU time spent in seconds.", CK_METRICS_COUNTER,
		      (double)(st.utime + st.stime) / (double)ticks);
	if (parse_max_files(limits, &v) == 0)
		gauge(out, "process_max_fds", "Maximum number of open file descriptors.",
		      CK_METRICS_GAUGE, v);
	if (count_fds(root, &v) == 0)
		gauge(out, "process_open_fds", "Number of open file descriptors.", CK_METRICS_GAUGE,
		      v);
	if (have_stat)
		gauge(out, "process_resident_memory_bytes", "Resident memory size in bytes.",
		      CK_METRICS_GAUGE, (double)st.rss * (double)page);
	if (have_stat && parse_btime(sys_stat, &btime) == 0)
		gauge(out, "process_start_time_seconds",
		      "Start time of the process since unix epoch in seconds.", CK_METRICS_GAUGE,
		      (double)btime + (double)st.starttime / (double)ticks);
	if (have_stat)
		gauge(out, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
		      CK_METRICS_GAUGE, (double)st.vsize);
	free(stat_text);
	free(sys_stat);
	free(limits);
}

void ck_metrics_registry_add_process_collector(ck_metrics_registry_t *reg, const char *proc_root)
{
	metrics_registry_add_collector_owned(reg, process_collect,
	                                     ck_xstrdup(proc_root ? proc_root : "/proc"), free);
}
