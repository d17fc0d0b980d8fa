/*
 * auth.h - OAuth2 access tokens for the Compute Engine API.
 *
 * Where the credentials come from, first found wins:
 *   1. clouds.gce.credentials (a file),
 *   2. $GOOGLE_APPLICATION_CREDENTIALS (a file),
 *   3. the gcloud ADC file: $CLOUDSDK_CONFIG/application_default_credentials.json,
 *      else ~/.config/gcloud/application_default_credentials.json,
 *   4. the metadata server (on a GCE VM; $GCE_METADATA_HOST overrides
 *      metadata.google.internal).
 * A file is a service-account key ("type": "service_account": an RS256 JWT
 * signed with its private_key is exchanged at its token_uri) or an
 * authorized_user file from `gcloud auth application-default login` (its
 * refresh_token is exchanged at its token_uri, or Google's when absent).
 * A file that group or others may read is refused (PBX_EXIT_SECURITY).
 *
 * The token is kept in memory until shortly before it expires and is
 * never logged or put in an error; it is wiped when replaced or freed.
 */
#ifndef PBX_CLOUD_GCE_AUTH_H
#define PBX_CLOUD_GCE_AUTH_H

#include <stddef.h>
#include <time.h>

#include "http/http.h"
#include "util/err.h"

#define PBX_GCE_TOKEN_URI "https://oauth2.googleapis.com/token"
#define PBX_GCE_SCOPE     "https://www.googleapis.com/auth/compute"

struct pbx_gce_auth;

/* Finds the credentials (see above) and reads them; fetches no token yet.
 * `credentials` is clouds.gce.credentials (may be NULL); `http` is used
 * for token requests and must outlive the result.  *out is owned by the
 * caller (pbx_gce_auth_close). */
int pbx_gce_auth_open(const char *credentials, struct pbx_http *http, struct pbx_gce_auth **out,
		      struct pbx_err *err);
void pbx_gce_auth_close(struct pbx_gce_auth *a);
/* "Authorization: Bearer TOKEN", fetching or refreshing the token when
 * needed.  *header is owned by the caller: free it with
 * pbx_gce_auth_free_header (which wipes it). */
int pbx_gce_auth_header(struct pbx_gce_auth *a, char **header, struct pbx_err *err);
void pbx_gce_auth_free_header(char *header);
/* Asks for tokens with `scope` (a static string; default PBX_GCE_SCOPE)
 * from now on, e.g. the billing catalogue's; the cached token is
 * forgotten.  A metadata server's token has the VM's scopes. */
void pbx_gce_auth_set_scope(struct pbx_gce_auth *a, const char *scope);
/* Forgets the cached token (after a 401), so the next header fetches one. */
void pbx_gce_auth_invalidate(struct pbx_gce_auth *a);
/* Where the credentials came from, for messages: e.g.
 * "service account sa@p.iam.gserviceaccount.com (/path/key.json)".
 * Owned by a. */
const char *pbx_gce_auth_source(const struct pbx_gce_auth *a);
/* project_id of a service-account key or quota_project_id of an
 * authorized_user file; NULL when none.  Owned by a. */
const char *pbx_gce_auth_project(const struct pbx_gce_auth *a);
/* Token fetches so far (for tests and PBX_STATS). */
unsigned pbx_gce_auth_fetches(const struct pbx_gce_auth *a);

/* ---------------------------------------------------- parsers (fuzzed) */

/* A token endpoint's or the metadata server's JSON reply: *token (caller
 * wipes and frees) and *expires_in (seconds, >= 1).  An error reply
 * ({"error", "error_description"}) or a malformed one fails with a
 * message naming `what` and never quoting a token. */
int pbx_gce_token_parse(const char *body, size_t len, const char *what, char **token,
			long *expires_in, struct pbx_err *err);

/* The fields of a credentials file pbx uses. */
struct pbx_gce_creds {
	char *type;           /* "service_account" or "authorized_user" */
	char *client_email;   /* service_account */
	char *private_key;    /* service_account: PEM */
	char *private_key_id; /* service_account, may be NULL */
	char *client_id, *client_secret, *refresh_token; /* authorized_user */
	char *token_uri; /* may be NULL (authorized_user: Google's) */
	char *project;   /* project_id / quota_project_id, may be NULL */
};

/* Parses a credentials file's text (`path` names it in errors: "PATH:
 * field FIELD: problem").  Secrets in *c are wiped by pbx_gce_creds_free. */
int pbx_gce_creds_parse(const char *path, const char *text, size_t len, struct pbx_gce_creds *c,
			struct pbx_err *err);
void pbx_gce_creds_free(struct pbx_gce_creds *c);

/* An RS256 JWT bearer assertion for the service account, valid from `now`
 * for an hour, audience `aud`.  Caller frees *jwt. */
int pbx_gce_jwt_make(const struct pbx_gce_creds *c, const char *aud, const char *scope, time_t now,
		     char **jwt, struct pbx_err *err);

#endif
