/*
 * package.h - an experiment's package: the code it ships (collected from
 * the experiment's directory), a content id, where it came from (git
 * commit and dirty diff, user, host, time), and the one tar file pushed to
 * the cluster with the per-task records the task wrapper reads.
 *
 * Tar layout (all under the package directory PKG_DIR once extracted):
 *   package.json     id, name, git, user, host, created, task range, outputs
 *   experiment.yaml  the experiment file's bytes
 *   pbx-task.sh      the task wrapper (the sbatch batch script), mode 0755
 *   env.sh           exports PBX_EXPERIMENT, PBX_PKG_ID and the file's env:
 *   train.yaml       train experiments only: the train: section as JSON
 *   git.diff         only when the checkout is dirty
 *   data.links       with data: one "ID TO" line per source (src/jobs/data.h)
 *   tasks.range      "FIRST COUNT\n": the global task indexes held here
 *   tasks.idx        one 32-byte line per task: "%15zu %15zu\n" = byte
 *                    OFFSET and LENGTH of its record in tasks.dat
 *   tasks.dat        the records, each starting at a multiple of 64 and
 *                    padded with '\n' to one, so a POSIX shell reads record
 *                    j with two dd(1) calls: line j of tasks.idx (bs=32
 *                    skip=j count=1), then bs=64 skip=OFFSET/64
 *                    count=ceil(LENGTH/64) of tasks.dat
 *   code/...         the collected files, paths relative to the file's dir
 * A record is shell text for `eval`, every value single-quoted:
 *   pbx_rec_index=GLOBAL_INDEX
 *   export PBX_REPEAT='R'
 *   export PBX_PARAM_<NAME IN UPPERCASE>='value'    (one per parameter)
 *   pbx_rec_json='{"name":"value",...}'
 *   pbx_rec_cmd='the task command'
 *   pbx_rec_end=1
 *
 * Nothing here prints.  Ownership is stated per function.
 */
#ifndef PBX_EXPERIMENT_PACKAGE_H
#define PBX_EXPERIMENT_PACKAGE_H

#include <stddef.h>

#include "experiment/experiment.h"
#include "util/buf.h"
#include "util/err.h"

#define PBX_PACKAGE_MAX_FILES   100000
#define PBX_PACKAGE_MAX_BYTES   (4ULL << 30)
#define PBX_PACKAGE_IDX_LINE    32 /* bytes per tasks.idx line */
#define PBX_PACKAGE_REC_ALIGN   64 /* records start at multiples of this */
#define PBX_PACKAGE_MAX_COMMAND PBX_EXPERIMENT_MAX_COMMAND

struct pbx_package_file {
	char *path;               /* relative, '/'-separated, sorted (strcmp) */
	char type;                /* 'f' file, 'd' directory, 'l' symlink */
	unsigned mode;            /* 0644 or 0755 (files), 0755 (dirs), 0777 (links) */
	unsigned long long size;  /* bytes, files only */
	char *target;             /* symlinks: where they point (relative, inside) */
	unsigned char sha256[32]; /* files: digest of the contents */
};

struct pbx_package {
	char id[65];       /* SHA-256 of the files and experiment (hex) */
	char short_id[13]; /* first 12 hex digits */
	struct pbx_package_file *files;
	size_t nfiles;
	unsigned long long bytes; /* total of the files' sizes */
	char *git_commit;         /* HEAD of the checkout holding e->dir, or NULL */
	char *git_diff;           /* `git diff HEAD` when not empty, or NULL */
	char *user, *host;
	long long created; /* seconds since the epoch */
};

/*
 * Collects the files of `e` (the `files` globs, or the whole of e->dir less
 * .pbxignore matches and .git), hashes them and records provenance.  The
 * id is SHA-256 over, for each entry in path order, "PATH\0TYPE MODE SIZE\n"
 * then its bytes (files) or target (links), then "experiment SIZE\n" and
 * the experiment file's bytes.  *out belongs to the caller
 * (pbx_package_free).  Runs git (when in a checkout); reads, never writes.
 */
int pbx_package_build(const struct pbx_experiment *e, struct pbx_package **out,
		      struct pbx_err *err);
void pbx_package_free(struct pbx_package *p);

/*
 * Writes the tar file `tar_path` (atomically: temporary file, fsync,
 * rename) holding tasks [first_task, first_task + ntasks) of e.  A code
 * file whose contents changed since pbx_package_build is an error.
 */
int pbx_package_write_tar(const struct pbx_package *p, const struct pbx_experiment *e,
			  size_t first_task, size_t ntasks, const char *tar_path,
			  struct pbx_err *err);

/* Appends tasks.dat and tasks.idx for tasks [first, first + n) to dat and
 * idx (pure; error when the range passes e->npoints or a command is longer
 * than PBX_PACKAGE_MAX_COMMAND, which a loaded experiment never has). */
int pbx_package_records(const struct pbx_experiment *e, size_t first, size_t n, struct pbx_buf *dat,
			struct pbx_buf *idx, struct pbx_err *err);
/* Finds record j (0-based within the range) as the wrapper does: *rec
 * points into dat, *len its length without padding.  Returns 0 or -1. */
int pbx_package_record(const char *dat, size_t datlen, const char *idx, size_t idxlen, size_t j,
		       const char **rec, size_t *len);
/* package.json text for tasks [first, first + n); caller frees. */
char *pbx_package_json(const struct pbx_package *p, const struct pbx_experiment *e, size_t first,
		       size_t n);
/* env.sh text; caller frees. */
char *pbx_package_env_sh(const struct pbx_package *p, const struct pbx_experiment *e);

#endif
