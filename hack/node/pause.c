// pause: the process that holds a pod sandbox's namespaces open.
//
// The kubelet (via containerd's CRI) starts one "pause" container per pod and joins
// the pod's other containers to its namespaces. The real image (registry.k8s.io/pause)
// cannot be pulled on the development machines, so this is a from-scratch
// equivalent built by hack/image.sh: as PID 1 of the sandbox it sleeps until SIGINT
// or SIGTERM (then exits 0) and reaps any zombie re-parented to it (SIGCHLD).
// Linked statically (`cc -static -Os`) so that the image needs nothing but this file.
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_term(int sig)
{
	_exit(0);
}

static void on_chld(int sig)
{
	while (waitpid(-1, NULL, WNOHANG) > 0) {
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && (argv[1][0] == '-' && argv[1][1] == 'v')) {
		puts("pause (c-sample-controller) 3.10");
		return 0;
	}
	struct sigaction sa = {0};
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_term;
	if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0)
		return 1;
	sa.sa_handler = on_chld;
	sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
	if (sigaction(SIGCHLD, &sa, NULL) < 0)
		return 2;
	if (getpid() != 1)
		fputs("pause: warning: not running as PID 1\n", stderr);
	for (;;)
		pause();
}
