/*
 * config.c - pbx-train's configuration: a table of keys (name, type, field
 * offset) drives the YAML reader, the --set overrides and the JSON dump, so
 * a key is added in one place.  YAML is read with libyaml's document API,
 * which keeps each node's line for error messages.  The model is either a
 * built-in name (`model: cnn-bn`) or a layer list:
 *
 *   model:
 *     layers:
 *       - {type: conv, filters: 32, kernel: 3, pad: 1}
 *       - batchnorm
 *       - relu
 *       - {type: maxpool, size: 2}
 *       - flatten
 *       - {type: linear, out: 10}
 *
 * (`layers:` may also sit at the top level; `- conv: {filters: 32}` works
 * too; a linear layer without `out` gets the number of classes).
 */
#include "train/config.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "util/fs.h"
#include "util/xalloc.h"

enum cfg_type { CFG_INT, CFG_I64, CFG_U64, CFG_DOUBLE, CFG_BOOL, CFG_STR };

#define K(name, type, field)                                         \
	{                                                            \
		name, type, offsetof(struct pbx_train_config, field) \
	}

static const struct cfg_key {
	const char *name;
	enum cfg_type type;
	size_t off;
} cfg_keys[] = {
	K("model", CFG_STR, model),
	K("dataset", CFG_STR, dataset),
	K("data_dir", CFG_STR, data_dir),
	K("epochs", CFG_INT, epochs),
	K("batch_size", CFG_INT, batch_size),
	K("optimizer", CFG_STR, optimizer),
	K("lr", CFG_DOUBLE, lr),
	K("momentum", CFG_DOUBLE, momentum),
	K("nesterov", CFG_BOOL, nesterov),
	K("weight_decay", CFG_DOUBLE, weight_decay),
	K("beta1", CFG_DOUBLE, beta1),
	K("beta2", CFG_DOUBLE, beta2),
	K("adam_eps", CFG_DOUBLE, adam_eps),
	K("schedule", CFG_STR, schedule),
	K("warmup_epochs", CFG_DOUBLE, warmup_epochs),
	K("step_epochs", CFG_DOUBLE, step_epochs),
	K("gamma", CFG_DOUBLE, gamma),
	K("min_lr", CFG_DOUBLE, min_lr),
	K("clip_norm", CFG_DOUBLE, clip_norm),
	K("seed", CFG_U64, seed),
	K("threads", CFG_INT, threads),
	K("device", CFG_STR, device),
	K("loader_threads", CFG_INT, loader_threads),
	K("deterministic", CFG_BOOL, deterministic),
	K("corruption", CFG_STR, corruption),
	K("corruption_prob", CFG_DOUBLE, corruption_prob),
	K("subset", CFG_INT, subset),
	K("test_subset", CFG_INT, test_subset),
	K("synthetic_n", CFG_INT, synthetic_n),
	K("augment.crop_pad", CFG_INT, crop_pad),
	K("augment.hflip", CFG_BOOL, hflip),
	K("checkpoint_every", CFG_I64, checkpoint_every),
	K("checkpoint_dir", CFG_STR, checkpoint_dir),
	K("output_dir", CFG_STR, output_dir),
	K("resume", CFG_STR, resume),
	K("eval_every", CFG_INT, eval_every),
	K("log_every", CFG_INT, log_every),
	K("max_steps", CFG_I64, max_steps),
	K("signal_at_step", CFG_I64, signal_at_step),
	K("sync_bn", CFG_BOOL, sync_bn),
	K("recompute", CFG_INT, recompute),
	K("bucket_kb", CFG_INT, bucket_kb),
	K("comm_timeout", CFG_DOUBLE, comm_timeout),
	K("train_files", CFG_STR, train_files),
	K("test_files", CFG_STR, test_files),
	K("mode", CFG_STR, mode),
	K("ps_ranks", CFG_INT, ps_ranks),
	K("n_push", CFG_INT, n_push),
	K("n_fetch", CFG_INT, n_fetch),
	K("ps_optimizer", CFG_STR, ps_optimizer),
	K("ps_timeout", CFG_DOUBLE, ps_timeout),
};

#define CFG_NKEYS ((int)(sizeof(cfg_keys) / sizeof(cfg_keys[0])))

void pbx_train_config_defaults(struct pbx_train_config *c)
{
	memset(c, 0, sizeof(*c));
	c->model = xstrdup("mlp");
	c->dataset = xstrdup("fashion-mnist");
	c->epochs = 10;
	c->batch_size = 128;
	c->optimizer = xstrdup("sgd");
	c->lr = 0.05;
	c->momentum = 0.9;
	c->beta1 = 0.9;
	c->beta2 = 0.999;
	c->adam_eps = 1e-8;
	c->schedule = xstrdup("constant");
	c->step_epochs = 10;
	c->gamma = 0.1;
	c->seed = 1;
	c->threads = 0;
	c->device = xstrdup("cpu");
	c->loader_threads = 1;
	c->corruption = xstrdup("none");
	c->synthetic_n = 1024;
	c->output_dir = xstrdup("pbx-train-out");
	c->eval_every = 1;
	c->log_every = 50;
	c->bucket_kb = 1024;
	c->comm_timeout = 300.0;
	c->mode = xstrdup("allreduce");
	c->ps_ranks = 1;
	c->n_push = 1;
	c->n_fetch = 1;
	c->ps_optimizer = xstrdup("adagrad");
	c->ps_timeout = 30.0;
}

void pbx_train_config_free(struct pbx_train_config *c)
{
	for (int i = 0; i < CFG_NKEYS; i++)
		if (cfg_keys[i].type == CFG_STR) {
			char **p = (char **)((char *)c + cfg_keys[i].off);
			free(*p);
			*p = NULL;
		}
	free(c->layers);
	c->layers = NULL;
	c->nlayers = 0;
}

static const struct cfg_key *cfg_find(const char *name)
{
	for (int i = 0; i < CFG_NKEYS; i++)
		if (strcmp(cfg_keys[i].name, name) == 0)
			return &cfg_keys[i];
	return NULL;
}

/* ------------------------------------------------------------ scalars */

static int cfg_parse_bool(const char *s, int *out)
{
	static const char *const yes[] = { "true", "yes", "on", "1", "True", "TRUE" };
	static const char *const no[] = { "false", "no", "off", "0", "False", "FALSE" };
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcmp(s, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcmp(s, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

static int cfg_parse_i64(const char *s, long long lo, long long hi, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int cfg_parse_double(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

/* Stores `val` into key k of c; `where` is "file:line" or "--set". */
static int cfg_assign(struct pbx_train_config *c, const struct cfg_key *k, const char *val,
		      const char *where, struct pbx_err *err)
{
	void *field = (char *)c + k->off;
	long long i;
	double d;
	int b;
	const char *want = NULL;
	switch (k->type) {
	case CFG_INT:
		if (cfg_parse_i64(val, -2147483647LL, 2147483647LL, &i) == 0)
			*(int *)field = (int)i;
		else
			want = "an integer";
		break;
	case CFG_I64:
		if (cfg_parse_i64(val, -(1LL << 62), 1LL << 62, &i) == 0)
			*(int64_t *)field = i;
		else
			want = "an integer";
		break;
	case CFG_U64:
		if (cfg_parse_i64(val, 0, 1LL << 62, &i) == 0)
			*(uint64_t *)field = (uint64_t)i;
		else
			want = "a non-negative integer";
		break;
	case CFG_DOUBLE:
		if (cfg_parse_double(val, &d) == 0)
			*(double *)field = d;
		else
			want = "a number";
		break;
	case CFG_BOOL:
		if (cfg_parse_bool(val, &b) == 0)
			*(int *)field = b;
		else
			want = "true or false";
		break;
	case CFG_STR: {
		char **p = field;
		if (strcmp(k->name, "device") == 0 && strcmp(val, "cpu") != 0 &&
		    strcmp(val, "cuda") != 0 && strcmp(val, "auto") != 0) {
			want = "cpu, cuda or auto";
			break;
		}
		free(*p);
		*p = (strcmp(val, "") == 0 || strcmp(val, "null") == 0 || strcmp(val, "~") == 0)
			     ? NULL
			     : xstrdup(val);
		if (strcmp(k->name, "model") == 0) {
			free(c->layers);
			c->layers = NULL;
			c->nlayers = 0;
		}
		break;
	}
	}
	if (want)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "%s: key '%s': expected %s, got '%s'",
				    where, k->name, want, val);
	return 0;
}

/* --------------------------------------------------------------- YAML */

struct cfg_yaml {
	yaml_document_t *doc;
	const char *path;
	struct pbx_train_config *c;
	struct pbx_err *err;
};

static int cfg_line(const yaml_node_t *n)
{
	return (int)n->start_mark.line + 1;
}

static const char *cfg_scalar(const yaml_node_t *n)
{
	return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* One layer spec field: name = value (at node n). */
static int cfg_layer_field(struct cfg_yaml *y, struct pbx_layer_spec *s, const char *key,
			   const yaml_node_t *n, int idx)
{
	const char *v = cfg_scalar(n);
	double d;
	static const struct {
		const char *name;
		int is_int;
		size_t off;
	} f[] = {
		{ "out", 1, offsetof(struct pbx_layer_spec, out) },
		{ "filters", 1, offsetof(struct pbx_layer_spec, out) },
		{ "features", 1, offsetof(struct pbx_layer_spec, out) },
		{ "kernel", 1, offsetof(struct pbx_layer_spec, k) },
		{ "stride", 1, offsetof(struct pbx_layer_spec, s) },
		{ "pad", 1, offsetof(struct pbx_layer_spec, p) },
		{ "padding", 1, offsetof(struct pbx_layer_spec, p) },
		{ "size", 1, offsetof(struct pbx_layer_spec, size) },
		{ "alpha", 0, offsetof(struct pbx_layer_spec, alpha) },
		{ "slope", 0, offsetof(struct pbx_layer_spec, alpha) },
		{ "beta", 0, offsetof(struct pbx_layer_spec, beta) },
		{ "bias", 0, offsetof(struct pbx_layer_spec, bias) },
		{ "k", 0, offsetof(struct pbx_layer_spec, bias) },
		{ "rate", 0, offsetof(struct pbx_layer_spec, rate) },
		{ "p", 0, offsetof(struct pbx_layer_spec, rate) },
		{ "eps", 0, offsetof(struct pbx_layer_spec, eps) },
		{ "momentum", 0, offsetof(struct pbx_layer_spec, momentum) },
	};
	if (strcmp(key, "type") == 0)
		return 0;
	/* pools call their kernel "size" */
	if ((s->kind == PBX_L_MAXPOOL || s->kind == PBX_L_AVGPOOL) && strcmp(key, "size") == 0)
		key = "kernel";
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (strcmp(key, f[i].name) != 0)
			continue;
		if (!v || cfg_parse_double(v, &d) < 0 ||
		    (f[i].is_int && (d != floor(d) || fabs(d) > 1e8)))
			return pbx_err_setc(y->err, PBX_EXIT_USAGE,
					    "%s:%d: key 'model.layers[%d].%s': expected %s",
					    y->path, cfg_line(n), idx, key,
					    f[i].is_int ? "an integer" : "a number");
		if (f[i].is_int)
			*(int *)((char *)s + f[i].off) = (int)d;
		else
			*(float *)((char *)s + f[i].off) = (float)d;
		return 0;
	}
	return pbx_err_setc(y->err, PBX_EXIT_USAGE,
			    "%s:%d: key 'model.layers[%d].%s': unknown layer option", y->path,
			    cfg_line(n), idx, key);
}

static int cfg_layer_kind(struct cfg_yaml *y, const yaml_node_t *n, const char *name, int idx,
			  struct pbx_layer_spec *s)
{
	enum pbx_layer_kind kind;
	if (!name || pbx_layer_kind_parse(name, &kind) < 0)
		return pbx_err_setc(
			y->err, PBX_EXIT_USAGE,
			"%s:%d: key 'model.layers[%d]': unknown layer type '%s' (conv, maxpool, avgpool, batchnorm, linear, relu, leaky_relu, tanh, sigmoid, gelu, dropout, lrn, flatten)",
			y->path, cfg_line(n), idx, name ? name : "?");
	pbx_layer_spec_defaults(s, kind);
	return 0;
}

/* Options of a layer from mapping node m (skipping "type"). */
static int cfg_layer_options(struct cfg_yaml *y, struct pbx_layer_spec *s, const yaml_node_t *m,
			     int idx)
{
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top;
	     p++) {
		const yaml_node_t *kn = yaml_document_get_node(y->doc, p->key);
		const yaml_node_t *vn = yaml_document_get_node(y->doc, p->value);
		const char *key = cfg_scalar(kn);
		if (!key)
			return pbx_err_setc(y->err, PBX_EXIT_USAGE,
					    "%s:%d: layer option names must be scalars", y->path,
					    cfg_line(kn));
		if (cfg_layer_field(y, s, key, vn, idx) < 0)
			return -1;
	}
	return 0;
}

static int cfg_layers(struct cfg_yaml *y, const yaml_node_t *seq)
{
	struct pbx_train_config *c = y->c;
	int n = (int)(seq->data.sequence.items.top - seq->data.sequence.items.start);
	if (seq->type != YAML_SEQUENCE_NODE || n == 0)
		return pbx_err_setc(
			y->err, PBX_EXIT_USAGE,
			"%s:%d: key 'model.layers': expected a non-empty list of layers", y->path,
			cfg_line(seq));
	struct pbx_layer_spec *specs = xcalloc((size_t)n, sizeof(*specs));
	for (int i = 0; i < n; i++) {
		const yaml_node_t *item =
			yaml_document_get_node(y->doc, seq->data.sequence.items.start[i]);
		struct pbx_layer_spec *s = &specs[i];
		if (item->type == YAML_SCALAR_NODE) {
			if (cfg_layer_kind(y, item, cfg_scalar(item), i, s) < 0)
				goto fail;
			continue;
		}
		if (item->type != YAML_MAPPING_NODE)
			goto bad;
		/* {type: conv, ...} or {conv: {...}} */
		const char *type = NULL;
		const yaml_node_t *opts = item;
		for (yaml_node_pair_t *p = item->data.mapping.pairs.start;
		     p < item->data.mapping.pairs.top; p++) {
			const char *key = cfg_scalar(yaml_document_get_node(y->doc, p->key));
			if (key && strcmp(key, "type") == 0)
				type = cfg_scalar(yaml_document_get_node(y->doc, p->value));
		}
		if (!type && item->data.mapping.pairs.top - item->data.mapping.pairs.start == 1) {
			yaml_node_pair_t *p = item->data.mapping.pairs.start;
			const yaml_node_t *vn = yaml_document_get_node(y->doc, p->value);
			type = cfg_scalar(yaml_document_get_node(y->doc, p->key));
			if (vn->type == YAML_MAPPING_NODE)
				opts = vn;
			else if (vn->type == YAML_SCALAR_NODE &&
				 (!*cfg_scalar(vn) || strcmp(cfg_scalar(vn), "null") == 0 ||
				  strcmp(cfg_scalar(vn), "~") == 0))
				opts = NULL;
			else
				goto bad;
		}
		if (cfg_layer_kind(y, item, type, i, s) < 0)
			goto fail;
		if (opts && cfg_layer_options(y, s, opts, i) < 0)
			goto fail;
		continue;
	bad:
		pbx_err_setc(
			y->err, PBX_EXIT_USAGE,
			"%s:%d: key 'model.layers[%d]': expected a layer name or a mapping with 'type'",
			y->path, cfg_line(item), i);
		goto fail;
	}
	free(c->layers);
	free(c->model);
	c->model = NULL;
	c->layers = specs;
	c->nlayers = n;
	return 0;
fail:
	free(specs);
	return -1;
}

static int cfg_mapping(struct cfg_yaml *y, const yaml_node_t *m, const char *prefix);

static int cfg_pair(struct cfg_yaml *y, const char *key, const yaml_node_t *vn, const char *prefix)
{
	char name[128], where[1100];
	snprintf(name, sizeof(name), "%s%s", prefix, key);
	snprintf(where, sizeof(where), "%s:%d", y->path, cfg_line(vn));
	if (strcmp(name, "layers") == 0 || strcmp(name, "model.layers") == 0)
		return cfg_layers(y, vn);
	if (strcmp(name, "model") == 0 && vn->type == YAML_SEQUENCE_NODE)
		return cfg_layers(y, vn);
	if (vn->type == YAML_MAPPING_NODE &&
	    (strcmp(name, "model") == 0 || strcmp(name, "augment") == 0)) {
		char sub[140];
		snprintf(sub, sizeof(sub), "%s.", name);
		return cfg_mapping(y, vn, sub);
	}
	if (strcmp(name, "model.name") == 0)
		snprintf(name, sizeof(name), "model");
	const struct cfg_key *k = cfg_find(name);
	if (!k)
		return pbx_err_setc(y->err, PBX_EXIT_USAGE,
				    "%s: unknown key '%s' (see pbx-train --help)", where, name);
	if (vn->type != YAML_SCALAR_NODE)
		return pbx_err_setc(y->err, PBX_EXIT_USAGE, "%s: key '%s': expected a single value",
				    where, name);
	return cfg_assign(y->c, k, cfg_scalar(vn), where, y->err);
}

static int cfg_mapping(struct cfg_yaml *y, const yaml_node_t *m, const char *prefix)
{
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top;
	     p++) {
		const yaml_node_t *kn = yaml_document_get_node(y->doc, p->key);
		const yaml_node_t *vn = yaml_document_get_node(y->doc, p->value);
		const char *key = cfg_scalar(kn);
		if (!key)
			return pbx_err_setc(y->err, PBX_EXIT_USAGE,
					    "%s:%d: keys must be plain names", y->path,
					    cfg_line(kn));
		if (cfg_pair(y, key, vn, prefix) < 0)
			return -1;
	}
	return 0;
}

int pbx_train_config_load(struct pbx_train_config *c, const char *path, struct pbx_err *err)
{
	struct pbx_buf text = PBX_BUF_INIT;
	yaml_parser_t parser;
	yaml_document_t doc;
	int rc = -1;
	/* a regular file of sane size, checked before reading (not /dev/zero) */
	if (pbx_read_regular(path, PBX_TRAIN_CONFIG_MAX_FILE, &text, NULL, err) < 0) {
		err->code = PBX_EXIT_USAGE;
		return -1;
	}
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text.buf, text.len);
	if (!yaml_parser_load(&parser, &doc)) {
		pbx_err_setc(err, PBX_EXIT_USAGE, "%s:%zu: YAML error: %s %s", path,
			     parser.problem_mark.line + 1, parser.problem ? parser.problem : "",
			     parser.context ? parser.context : "");
		yaml_parser_delete(&parser);
		pbx_buf_release(&text);
		return -1;
	}
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	struct cfg_yaml y = { &doc, path, c, err };
	if (!root) {
		rc = 0; /* empty file: defaults */
		goto out;
	}
	if (root->type != YAML_MAPPING_NODE) {
		pbx_err_setc(err, PBX_EXIT_USAGE, "%s:%d: expected a mapping of settings", path,
			     cfg_line(root));
		goto out;
	}
	/* a pbx experiment file: use its train: section */
	for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
	     p++) {
		const char *key = cfg_scalar(yaml_document_get_node(&doc, p->key));
		yaml_node_t *vn = yaml_document_get_node(&doc, p->value);
		if (key && strcmp(key, "train") == 0) {
			if (vn->type != YAML_MAPPING_NODE) {
				pbx_err_setc(err, PBX_EXIT_USAGE,
					     "%s:%d: key 'train': expected a mapping", path,
					     cfg_line(vn));
				goto out;
			}
			root = vn;
			break;
		}
	}
	rc = cfg_mapping(&y, root, "");
out:
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	pbx_buf_release(&text);
	return rc;
}

int pbx_train_config_set(struct pbx_train_config *c, const char *assignment, struct pbx_err *err)
{
	const char *eq = strchr(assignment, '=');
	char key[128];
	if (!eq || eq == assignment || (size_t)(eq - assignment) >= sizeof(key))
		return pbx_err_setc(err, PBX_EXIT_USAGE, "--set %s: expected key=value",
				    assignment);
	memcpy(key, assignment, (size_t)(eq - assignment));
	key[eq - assignment] = '\0';
	if (strcmp(key, "model.name") == 0)
		snprintf(key, sizeof(key), "model");
	const struct cfg_key *k = cfg_find(key);
	if (!k)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "--set: unknown key '%s' (see pbx-train --help)", key);
	return cfg_assign(c, k, eq + 1, "--set", err);
}

int pbx_train_config_check(const struct pbx_train_config *c, struct pbx_err *err)
{
	const struct pbx_layer_spec *specs;
	enum pbx_optim_kind ok;
	enum pbx_sched_kind sk;
	int n;
	if (!c->layers && (!c->model || pbx_model_builtin(c->model, &specs, &n) < 0))
		return pbx_err_setc(
			err, PBX_EXIT_USAGE,
			"key 'model': unknown model '%s' (built-in: %s; or give a layer list)",
			c->model ? c->model : "", pbx_model_builtin_names());
	if (!c->dataset)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "key 'dataset': missing");
	if (c->epochs < 1)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "key 'epochs': must be at least 1");
	if (c->batch_size < 1 || c->batch_size > 65536)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "key 'batch_size': must be in 1..65536");
	if (!c->optimizer || pbx_optim_parse(c->optimizer, &ok) < 0)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "key 'optimizer': expected sgd, adam or adamw");
	if (!c->schedule || pbx_sched_parse(c->schedule, &sk) < 0)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "key 'schedule': expected constant, step or cosine");
	if (c->lr <= 0.0)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "key 'lr': must be positive");
	if (c->threads < 0 || c->loader_threads < 0)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "key 'threads': must not be negative");
	if (c->corruption_prob < 0.0 || c->corruption_prob > 1.0)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "key 'corruption_prob': must be in [0, 1]");
	if (c->eval_every < 0 || c->log_every < 1 || c->subset < 0 || c->test_subset < 0 ||
	    c->crop_pad < 0 || c->checkpoint_every < 0 || c->synthetic_n < 1)
		return pbx_err_setc(
			err, PBX_EXIT_USAGE,
			"eval_every, subset, test_subset, augment.crop_pad and checkpoint_every must not be negative; log_every and synthetic_n must be positive");
	if (!c->output_dir)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "key 'output_dir': missing");
	if (c->recompute < -1)
		return pbx_err_setc(
			err, PBX_EXIT_USAGE,
			"key 'recompute': expected 0 (off), -1 (sqrt(layers) segments) or a number of segments");
	if (c->bucket_kb < 1)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "key 'bucket_kb': must be positive");
	if (!(c->comm_timeout > 0.0))
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "key 'comm_timeout': must be positive (seconds)");
	if (strcmp(c->dataset, "tfrecord") == 0 && (!c->train_files || !c->test_files))
		return pbx_err_setc(
			err, PBX_EXIT_USAGE,
			"key '%s': dataset tfrecord needs train_files and test_files (glob patterns)",
			c->train_files ? "test_files" : "train_files");
	if (!c->mode || (strcmp(c->mode, "allreduce") != 0 && strcmp(c->mode, "downpour") != 0))
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "key 'mode': expected allreduce or downpour");
	/* Downpour's workers hand host parameters to the servers: CPU only. */
	if (strcmp(c->mode, "downpour") == 0 && c->device && strcmp(c->device, "cuda") == 0)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "key 'device': mode downpour runs on the CPU "
				    "(device cpu)");
	if (c->ps_ranks < 1 || c->n_push < 1 || c->n_fetch < 1)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "keys 'ps_ranks', 'n_push', 'n_fetch': must be at least 1");
	if (!c->ps_optimizer ||
	    (strcmp(c->ps_optimizer, "sgd") != 0 && strcmp(c->ps_optimizer, "adagrad") != 0))
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "key 'ps_optimizer': expected sgd or adagrad");
	if (!(c->ps_timeout > 0.0))
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "key 'ps_timeout': must be positive (seconds)");
	return 0;
}

char *pbx_train_config_json(const struct pbx_train_config *c)
{
	json_t *o = json_object();
	for (int i = 0; i < CFG_NKEYS; i++) {
		const void *f = (const char *)c + cfg_keys[i].off;
		json_t *v = NULL;
		switch (cfg_keys[i].type) {
		case CFG_INT:
			v = json_integer(*(const int *)f);
			break;
		case CFG_I64:
			v = json_integer(*(const int64_t *)f);
			break;
		case CFG_U64:
			v = json_integer((json_int_t) * (const uint64_t *)f);
			break;
		case CFG_DOUBLE:
			v = json_real(*(const double *)f);
			break;
		case CFG_BOOL:
			v = json_boolean(*(const int *)f);
			break;
		case CFG_STR: {
			const char *s = *(char *const *)f;
			v = s ? json_string(s) : json_null();
			break;
		}
		}
		json_object_set_new(o, cfg_keys[i].name, v);
	}
	if (c->layers) {
		json_t *a = json_array();
		for (int i = 0; i < c->nlayers; i++)
			json_array_append_new(a,
					      json_string(pbx_layer_kind_name(c->layers[i].kind)));
		json_object_set_new(o, "layers", a);
	}
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}
