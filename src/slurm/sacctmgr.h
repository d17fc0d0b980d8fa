/*
 * sacctmgr.h - the user's job submit limit from SLURM's accounting
 * database: what `sacctmgr -nP` says of the user's associations and of the
 * QOS, parsed, and the one limit pbx sizes its arrays by (MaxSubmitJobs:
 * every array task counts as a job).  A cluster without slurmdbd has no
 * such limit to read: the script then says PBX-NODB and the limit is "not
 * known".  The formats and their sources: docs/slurm-versions.md.
 */
#ifndef PBX_SLURM_SACCTMGR_H
#define PBX_SLURM_SACCTMGR_H

#include <stddef.h>

#include "util/err.h"

/* The formats pbx asks for: one line per association of the user
 * (Account|Partition|MaxSubmit|QOS|DefaultQOS) and per QOS (Name|MaxSubmitPU);
 * an unset limit is an empty field. */
#define PBX_SACCTMGR_ASSOC_FORMAT "Account,Partition,MaxSubmitJobs,QOS,DefaultQOS"
#define PBX_SACCTMGR_QOS_FORMAT   "Name,MaxSubmitJobsPerUser"

/* A shell fragment for a remote script: prints "PBX-ASSOC", the association
 * lines, "PBX-QOS", the QOS lines; or "PBX-NODB" when sacctmgr is missing
 * or fails (no slurmdbd), each call given at most 20 s where `timeout`
 * exists.  What pbx_sacctmgr_limit_parse reads. */
#define PBX_SACCTMGR_SCRIPT                                                                     \
	"T=; command -v timeout >/dev/null 2>&1 && T='timeout 20'\n"                            \
	"if command -v sacctmgr >/dev/null 2>&1 &&"                                             \
	" a=$($T sacctmgr -nP show assoc where user=\"$(id -un)\""                              \
	" format=" PBX_SACCTMGR_ASSOC_FORMAT " 2>/dev/null) &&"                                 \
	" q=$($T sacctmgr -nP show qos format=" PBX_SACCTMGR_QOS_FORMAT " 2>/dev/null); then\n" \
	"  printf 'PBX-ASSOC\\n%s\\nPBX-QOS\\n%s\\n' \"$a\" \"$q\"\n"                           \
	"else echo PBX-NODB; fi\n"

struct pbx_slurm_assoc {
	char *account, *partition; /* partition "" for every partition */
	long max_submit;           /* MaxSubmitJobs, inherited from the account's; -1 unset */
	char *qos;                 /* the QOS it may use, "a,b" ("" none) */
	char *def_qos;             /* its default QOS, "" when unset */
};

struct pbx_slurm_qos {
	char *name;
	long max_submit_pu; /* MaxSubmitJobsPerUser; -1 unset */
};

/* Parse `sacctmgr -nP` lines in the formats above; blank lines are skipped,
 * any other line not of the format is an error naming it.  *rows owned by
 * the caller (the matching _free). */
int pbx_sacctmgr_assoc_parse(const char *text, size_t len, struct pbx_slurm_assoc **rows, size_t *n,
			     struct pbx_err *err);
void pbx_sacctmgr_assoc_free(struct pbx_slurm_assoc *rows, size_t n);
int pbx_sacctmgr_qos_parse(const char *text, size_t len, struct pbx_slurm_qos **rows, size_t *n,
			   struct pbx_err *err);
void pbx_sacctmgr_qos_free(struct pbx_slurm_qos *rows, size_t n);

enum pbx_submit_limit_kind {
	PBX_SUBMIT_LIMIT_UNKNOWN, /* no accounting database (PBX-NODB) */
	PBX_SUBMIT_LIMIT_NONE,    /* the database sets none for the user */
	PBX_SUBMIT_LIMIT_SET,
};

struct pbx_submit_limit {
	enum pbx_submit_limit_kind kind;
	long max;         /* with PBX_SUBMIT_LIMIT_SET: jobs (array tasks) queued at once */
	char source[200]; /* e.g. "QOS normal, MaxSubmitJobsPerUser" */
};

/*
 * The limit of the user's jobs submitted with `account` and `qos` (NULL or
 * "": the association's default), as SLURM applies it: per association, the
 * QOS's MaxSubmitJobsPerUser when that QOS sets one, else the association's
 * MaxSubmitJobs; the smallest over the user's associations of that account
 * (of all of them when none matches), as pbx does not know which partition
 * a job lands in.
 */
void pbx_slurm_submit_limit(const struct pbx_slurm_assoc *assoc, size_t na,
			    const struct pbx_slurm_qos *qos, size_t nq, const char *account,
			    const char *qos_name, struct pbx_submit_limit *out);

/* Reads the output of PBX_SACCTMGR_SCRIPT (`len` bytes) into *out for
 * `account` and `qos` as above.  Malformed output is an error. */
int pbx_sacctmgr_limit_parse(const char *text, size_t len, const char *account,
			     const char *qos_name, struct pbx_submit_limit *out,
			     struct pbx_err *err);

#endif
