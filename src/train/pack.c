/*
 * pack.c - `pbx-train pack`: writes a data set (IDX or CIFAR-10 files) as
 * TFRecord shards of tf.train.Example records, which `dataset: tfrecord`
 * (or TensorFlow's tf.data.TFRecordDataset) reads back.  The format and
 * the shard layout are runtime/tfrecord.h's.
 */
#include "train/pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/dataset.h"
#include "runtime/tfrecord.h"
#include "util/fs.h"

static void pack_usage(FILE *f)
{
	fprintf(f, "usage: " PBX_TRAIN_PACK_USAGE "\n"
		   "\n"
		   "Writes DATASET (fashion-mnist, mnist: IDX files; cifar10: binary batches)\n"
		   "from DATA_DIR (\"\" = the default directory) as TFRecord shards\n"
		   "OUT_DIR/DATASET-SPLIT-0000i-of-0000N.tfrecord of tf.train.Example records\n"
		   "(image: raw uint8 pixels HWC, label, height, width, channels), in the\n"
		   "data set's order.  --split train (default) or test; --shards N (1).\n"
		   "Read them back with dataset: tfrecord, train_files / test_files.\n");
}

/* Parses the options after the positional arguments. */
static int pack_options(int argc, char **argv, const char **split, int *shards, const char **pos,
			struct pbx_err *err)
{
	int npos = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if ((strcmp(a, "--split") == 0 || strcmp(a, "--shards") == 0) && i + 1 >= argc)
			return pbx_err_setc(err, PBX_EXIT_USAGE, "%s needs a value", a);
		if (strcmp(a, "--split") == 0) {
			*split = argv[++i];
		} else if (strcmp(a, "--shards") == 0) {
			char *end;
			long v = strtol(argv[++i], &end, 10);
			if (*end || end == argv[i] || v < 1 || v > 99999)
				return pbx_err_setc(err, PBX_EXIT_USAGE,
						    "--shards: expected 1..99999, got '%s'",
						    argv[i]);
			*shards = (int)v;
		} else if (a[0] == '-' && a[1]) {
			return pbx_err_setc(err, PBX_EXIT_USAGE, "unknown option %s", a);
		} else if (npos == 3) {
			return pbx_err_setc(err, PBX_EXIT_USAGE, "unexpected argument '%s'", a);
		} else {
			pos[npos++] = a;
		}
	}
	if (npos != 3)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "expected DATASET DATA_DIR OUT_DIR");
	if (strcmp(*split, "train") != 0 && strcmp(*split, "test") != 0)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "--split: expected train or test, got '%s'", *split);
	return 0;
}

int pbx_train_pack_main(int argc, char **argv)
{
	const char *split = "train", *pos[3] = { 0 };
	int shards = 1, rc = 1;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_dataset ds;
	memset(&ds, 0, sizeof(ds));
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			pack_usage(stdout);
			return fflush(stdout) ? 1 : 0;
		}
	if (pack_options(argc, argv, &split, &shards, pos, &err) < 0) {
		fprintf(stderr, "pbx-train pack: %s\nusage: %s\n", err.msg, PBX_TRAIN_PACK_USAGE);
		return 2;
	}
	char prefix[256];
	snprintf(prefix, sizeof(prefix), "%s-%s", pos[0], split);
	if (pbx_dataset_load_named(pos[0], pos[1], strcmp(split, "train") == 0, &ds, &err) < 0 ||
	    pbx_mkdir_p(pos[2], 0755, &err) < 0 ||
	    pbx_tfrecord_pack(&ds, pos[2], prefix, shards, &err) < 0) {
		fprintf(stderr, "pbx-train pack: error: %s\n", err.msg);
		rc = err.code ? err.code : 1;
	} else {
		printf("%s/%s-{00000..%05d}-of-%05d.tfrecord: %d examples %dx%dx%d, %d shard(s)\n",
		       pos[2], prefix, shards - 1, shards, ds.n, ds.h, ds.w, ds.c, shards);
		rc = fflush(stdout) ? 1 : 0;
	}
	pbx_dataset_free(&ds);
	return rc;
}
