/*
 * webapp: a controller of WebApps (crd.yaml): each gets a Deployment and a
 * Service, kept as its spec says, and a status with a Ready condition; see
 * README.md. The kind's C is generated from crd.yaml by ckube-gen:
 *
 *   ckube-gen -o gen examples/webapp/crd.yaml
 *   cc -Igen main.c webapp.c gen/v1alpha1/web_app.c $(pkg-config --cflags --libs ckube)
 */
#include "webapp.h"

int main(int argc, char **argv)
{
	static webapp_t w;
	int rc;
	ck_manager_opts_t mo = {.name = "webapp", .version = "0.1.0"};
	ck_manager_t *m = ck_manager_new(&mo, argc, argv, &rc);
	if (m == NULL)
		return rc;
	webapp_setup(&w, m);
	return ck_manager_run(m);
}
