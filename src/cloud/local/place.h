/*
 * place.h - where a local cluster's directory lives.  Its handle is
 * $PBX_HOME/clusters/NAME.  Under a PBX_HOME the task user cannot pass
 * through (the default /root/.pbx: /root is 0700), slurmd could not run a
 * task as the task user there (docs/SECURITY.md, "Who is who on a node"),
 * so root's new clusters there live in PBX_LOCAL_BODIES_DIR/ID (default
 * /var/lib/pbx/nodes; ID the first 12 hex digits of the cluster's id, so
 * that slurmd's sockets there stay within the 108 bytes of a Unix socket
 * path; every directory on the way passable, 0711) and the
 * handle is a symbolic link to it.  Elsewhere, and for a cluster made
 * before, the handle is the directory itself.
 */
#ifndef PBX_CLOUD_LOCAL_PLACE_H
#define PBX_CLOUD_LOCAL_PLACE_H

#include "util/err.h"

/* The cluster's directory for handle `home_dir` of cluster `uid`: the
 * link's target when the handle is such a link, the handle when it is a
 * directory; for a cluster not made yet, where pbx_local_place_make will
 * make it.  Caller frees. */
char *pbx_local_place_real(const char *home_dir, const char *uid);

/* Makes the cluster's directory `real` (pbx_local_place_real's) and, when
 * it is not the handle, opens the way to it to the task user (o+x on pbx's
 * own directories above it) and links the handle to it.  0, or -1 with
 * err set. */
int pbx_local_place_make(const char *home_dir, const char *real, struct pbx_err *err);

/* Removes the handle when it is a link (the directory it names is the
 * caller's to remove). */
void pbx_local_place_unlink(const char *home_dir);

#endif
