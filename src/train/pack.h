/*
 * pack.h - `pbx-train pack`, the verb that writes TFRecord shards
 * (pack.c).  main.c hands it argv from the verb on.
 */
#ifndef PBX_TRAIN_PACK_H
#define PBX_TRAIN_PACK_H

#define PBX_TRAIN_PACK_USAGE \
	"pbx-train pack DATASET DATA_DIR OUT_DIR [--split train|test] [--shards N]"

/* argv[0] is "pack".  Returns the exit status (0, 1 failure, 2 usage);
 * prints its own errors. */
int pbx_train_pack_main(int argc, char **argv);

#endif
