/*
 * experiment.h - experiment files (train.conf / experiment.yaml): a
 * `command` or a `train:` section, a parameter sweep expanded into points,
 * sbatch resources, the files to ship, the outputs to harvest and extra
 * environment.  The format is described precisely in FORMAT.md (the source
 * of the man page section).
 *
 * Errors are PBX_EXIT_USAGE with "FILE:LINE: dotted.key: problem", read
 * with src/config/yamltree.h.  Nothing here prints, exits or touches the
 * network; pbx_experiment_load reads one file.
 *
 * Ownership: a struct pbx_experiment and everything it points to (strings,
 * arrays, points and their params) belongs to the experiment and is
 * released by pbx_experiment_free().  Param names and values are shared
 * between points (two points with the same value may point at the same
 * bytes): never free or modify them.  Strings returned by the functions
 * documented "caller frees" are fresh and released with free(3).
 */
#ifndef PBX_EXPERIMENT_EXPERIMENT_H
#define PBX_EXPERIMENT_EXPERIMENT_H

#include <stdbool.h>
#include <stddef.h>

#include "slurm/sbatch.h"
#include "util/err.h"

#define PBX_EXPERIMENT_MAX_POINTS  100000     /* tasks per experiment file */
#define PBX_EXPERIMENT_MAX_CELLS   2000000    /* points x parameters */
#define PBX_EXPERIMENT_MAX_VALUE   65536      /* bytes of one parameter value */
#define PBX_EXPERIMENT_MAX_FILE    (16 << 20) /* bytes of the experiment file */
/* YAML nodes of the file: a `list` entry of k parameters takes 2k + 1, so a
 * list of MAX_POINTS points fits with up to 4 parameters (FORMAT.md) */
#define PBX_EXPERIMENT_MAX_NODES   1000000
/* bytes of one task's command after substitution: it is one argument of
 * execve(2), which Linux caps at 128 KiB (MAX_ARG_STRLEN), less room for
 * the wrapper */
#define PBX_EXPERIMENT_MAX_COMMAND 131000

struct pbx_param {
	char *name;  /* [a-z_][a-z0-9_]{0,31}, or "repeat" */
	char *value; /* the YAML scalar's text, NUL-terminated, no NUL inside */
	size_t len;  /* strlen(value) */
};

struct pbx_point {
	struct pbx_param *params; /* in declaration order (see FORMAT.md),
				      "repeat" last when repeats > 1 */
	size_t nparams;           /* the same for every point */
};

/* `environment:` (environment.c; FORMAT.md "Environment"): the Python
 * packages the tasks import, or the container image they run in.  All
 * NULL when the key is absent. */
struct pbx_exp_environment {
	char *python_file;   /* environment.python as a path, relative to dir */
	char *python_text;   /* or the inline list, one requirement per line */
	char *wheels;        /* environment.wheels: a directory relative to dir */
	char *installer;     /* environment.installer: "auto", "uv", "pip" or NULL (auto) */
	char *container;     /* environment.container: an image archive, relative to dir */
	char *container_ref; /* or a registry reference, docker://REF (checked: no
				shell characters), pulled on the cluster's head */
	char **apt;          /* environment.apt: Debian packages every node needs
			      (NAME or NAME=VERSION, checked), or NULL */
	size_t napt;
	int line; /* of environment: (0: no environment) */
	int python_line, wheels_line, container_line, apt_line;
};

/* One entry of `data:` (data.c; FORMAT.md "Data"): a dataset staged once
 * per cluster (src/jobs/data.c) and linked into each task directory. */
struct pbx_exp_data {
	char *from; /* gs://..., s3://... or a local directory (relative to dir), as written */
	char *to;   /* relative path in the task directory (checked) */
	int is_url; /* from is a store URL */
	int line;   /* of the entry */
};

/* Whether s is a Debian package name, NAME or NAME=VERSION, of Debian
 * policy's characters (environment.apt; what reaches a root shell). */
int pbx_exp_apt_name_ok(const char *s);

/* Whether ref is a registry reference pbx pulls (environment.container):
 * docker://[HOST[:PORT]/]NAME[:TAG][@sha256:64 hex], at most 512 bytes, of
 * the distribution spec's characters only (what reaches the head's shell). */
int pbx_exp_image_ref_ok(const char *ref);
/* Whether s is a registry as a reference names it (`pbx cluster
 * registry-login`): HOST[:PORT], letters, digits, '.' and '-', at most
 * 255 bytes. */
int pbx_exp_registry_ok(const char *s);

struct pbx_experiment {
	char *path;               /* file name as given (messages); "" for parse() */
	char *dir;                /* directory of the file (absolute after load) */
	char *name;               /* [A-Za-z0-9][A-Za-z0-9_.-]{0,63} */
	char *command;            /* the `command` text, NULL for train experiments */
	char *train_json;         /* the `train:` mapping as JSON (scalars as strings,
			      plain nulls as null), NULL for command ones */
	struct pbx_point *points; /* the expanded sweep, npoints >= 1 */
	size_t npoints;
	size_t repeats; /* sweep.repeats, >= 1 */
	/* `resources`: sbatch long options ("" = a bare flag such as
	   --exclusive), throttle (the %N of --array, 0 = none) and launcher */
	struct pbx_sbatch_opts res;
	char **files, **outputs; /* patterns (pattern.c); nfiles == 0: the whole dir */
	size_t nfiles, noutputs;
	int *files_lines, *outputs_lines; /* the line of each pattern in the file */
	char **env_names, **env_values;
	size_t nenv;
	struct pbx_exp_environment env;
	char *notify;    /* notify: a webhook URL (notify.c; a secret: never shown), or NULL */
	int notify_line; /* of notify: */
	struct pbx_exp_data *data; /* data: entries, in file order */
	size_t ndata;
	char *text; /* the file's bytes (NUL-terminated) */
	size_t text_len;
};

/*
 * Reads and parses the experiment file `path`; e->dir is the absolute
 * directory holding it.  On success *out is a new experiment (free with
 * pbx_experiment_free); on failure *out is NULL and err is set.
 */
int pbx_experiment_load(const char *path, struct pbx_experiment **out, struct pbx_err *err);
/* Parses `len` bytes; `name` is used in messages and as e->path, `dir`
 * (may be NULL for ".") is stored as e->dir unchanged. */
int pbx_experiment_parse(const char *name, const char *text, size_t len, const char *dir,
			 struct pbx_experiment **out, struct pbx_err *err);
void pbx_experiment_free(struct pbx_experiment *e);

/*
 * Sets (replacing or adding) resource `key` (no leading "--") to `value`,
 * validated as in the file: "throttle" sets e->res.throttle, "launcher"
 * e->res.launcher; a flag option
 * takes "" or "true".  Error (PBX_EXIT_USAGE) "--KEY: ..." leaves e as it
 * was.
 */
int pbx_experiment_override_resource(struct pbx_experiment *e, const char *key, const char *value,
				     struct pbx_err *err);
/* The resources as sbatch arguments "--key=value" (or "--key" for a flag),
 * in file order, overrides last; throttle and launcher not included (see
 * pbx_sbatch_opts_argv).  *n gets the count.  Caller frees each string and
 * the array. */
char **pbx_experiment_sbatch_args(const struct pbx_experiment *e, size_t *n);

/*
 * The shell command of point i: `command` with each {name} replaced by the
 * shell-quoted value ({repeat} is "0" when repeats == 1), {{ and }} by
 * single braces; for train experiments "pbx-train train.yaml" followed by
 * " --set 'name=value'" for each parameter but repeat, then " --resume".
 * Caller frees.
 */
char *pbx_experiment_task_command(const struct pbx_experiment *e, size_t i);
/* The host of e's notify: URL (no user, password, path or query: what a
 * message may show), or NULL when there is none.  Caller frees. */
char *pbx_experiment_notify_host(const struct pbx_experiment *e);
/* Point i's parameters as compact JSON {"name": "value", ...} (all values
 * strings, declaration order).  Caller frees. */
char *pbx_experiment_point_json(const struct pbx_experiment *e, size_t i);
/* The value of parameter `name` in point i, or NULL. */
const struct pbx_param *pbx_experiment_param(const struct pbx_experiment *e, size_t i,
					     const char *name);
/* The repeat number of point i (0..repeats-1). */
size_t pbx_experiment_repeat(const struct pbx_experiment *e, size_t i);

/* The normalised form of data source i ("gs://BUCKET/PREFIX/",
 * "s3://...", or "local:" + the real path of a directory, which must exist
 * now) into *key (caller frees) and its id, the first 16 hex digits of its
 * SHA-256, into id.  -1 with err (PBX_EXIT_USAGE) naming file and line. */
int pbx_experiment_data_key(const struct pbx_experiment *e, size_t i, char **key, char id[17],
			    struct pbx_err *err);
/* True when `rel` (relative to e->dir) is a local data source written as a
 * relative path: the package leaves it out (it is staged, not shipped). */
bool pbx_experiment_data_shadows(const struct pbx_experiment *e, const char *rel);

/*
 * The one rule of `files:` and `outputs:` patterns (FORMAT.md, Patterns):
 * path components matched one by one with fnmatch(3) FNM_PATHNAME |
 * FNM_PERIOD ("./" and empty components ignored); an entry matches when its
 * relative path `rel` or a directory above it does, and a pattern written
 * with a trailing "/" matches only a directory (is_dir) or what is below.
 */
bool pbx_pattern_match(const char *pattern, const char *rel, bool is_dir);
/* True when entries below directory `dir` (relative, "" for the top) may
 * match `pattern`: it has more components and its first ones match. */
bool pbx_pattern_may_enter(const char *pattern, const char *dir);

#endif
