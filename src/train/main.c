/*
 * main.c - pbx-train's command line: read the config, apply --set
 * overrides, install the signal handlers and run the loop.  Only this file
 * prints errors and picks exit codes (0 done, 1 failure, 2 bad usage or
 * configuration, 75 checkpointed after SIGTERM/SIGUSR1: requeue).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/comm.h"
#include "train/config.h"
#include "train/device.h"
#include "train/downpour.h"
#include "train/pack.h"
#include "train/train.h"

#define USAGE "pbx-train CONFIG.yaml [--set key=value ...] [--resume[=PATH]]"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " USAGE "\n"
		"       " PBX_TRAIN_PACK_USAGE "\n"
		"       pbx-train --help | --version\n"
		"\n"
		"Trains an image classifier on the CPU (OpenBLAS + OpenMP) or an NVIDIA GPU\n"
		"(cuDNN + cuBLAS) as configured by CONFIG.yaml: a mapping of the keys below,\n"
		"or a pbx experiment file whose `train:` section holds them.  `-` as CONFIG\n"
		"means defaults only.\n"
		"\n"
		"keys (default):\n"
		"  model (mlp)             mlp, lenet, cnn-bn, mini-alexnet, or model.layers: [...]\n"
		"  dataset (fashion-mnist) fashion-mnist, mnist, cifar10, synthetic, tfrecord\n"
		"  data_dir                directory of the data set files (runtime default)\n"
		"  train_files, test_files glob patterns of TFRecord shards (dataset: tfrecord;\n"
		"                          written by pbx-train pack or TensorFlow)\n"
		"  epochs (10) batch_size (128) seed (1) threads (all CPUs) loader_threads (1)\n"
		"  optimizer (sgd)         sgd, adam, adamw\n"
		"  lr (0.05) momentum (0.9) nesterov (false) weight_decay (0)\n"
		"  beta1 (0.9) beta2 (0.999) adam_eps (1e-8)\n"
		"  schedule (constant)     constant, step (step_epochs, gamma), cosine (min_lr)\n"
		"  warmup_epochs (0)       linear warm-up before the schedule\n"
		"  clip_norm (0 = off)     global gradient-norm clipping\n"
		"  deterministic (false)   same seed + threads -> identical results\n"
		"  corruption (none)       labels, random_labels, shuffled_pixels, random_pixels, gaussian\n"
		"  corruption_prob (0)     for corruption: labels\n"
		"  subset / test_subset (0 = all)   keep the first N examples\n"
		"  synthetic_n (1024)      size of the synthetic training set\n"
		"  augment.crop_pad (0) augment.hflip (false)\n"
		"  eval_every (1)          epochs between test-set evaluations\n"
		"  log_every (50)          steps between metrics.jsonl lines\n"
		"  checkpoint_every (0)    steps between checkpoints (also at the end)\n"
		"  checkpoint_dir (output_dir)  output_dir (pbx-train-out)\n"
		"  resume                  a checkpoint path, or auto (latest if any)\n"
		"  max_steps (0)           stop with a checkpoint after N steps\n"
		"  recompute (0)           activation recomputation: 0 off, -1 sqrt(layers)\n"
		"                          segments, N segments (same gradients, less memory)\n"
		"  device (cpu)            cpu; cuda (one GPU per process: an error naming\n"
		"                          what is missing without one); auto (cuda when a GPU\n"
		"                          is usable, else the CPU with a one-line notice)\n"
		"\n"
		"data parallelism (under mpirun or srun; batch_size is the global batch):\n"
		"  sync_bn (false)         batch norm statistics over all ranks\n"
		"  bucket_kb (1024)        gradient allreduce bucket size\n"
		"  comm_timeout (300)      seconds a collective may wait before the job ends\n"
		"                          with a message naming the rank that stopped\n"
		"\n"
		"Downpour SGD (mode: downpour; mpirun --enable-recovery -np N, N > ps_ranks;\n"
		"batch_size is per worker):\n"
		"  mode (allreduce)        allreduce (synchronous) or downpour (asynchronous)\n"
		"  ps_ranks (1)            ranks 0..ps_ranks-1 are parameter servers, the rest\n"
		"                          workers; the first worker writes the outputs\n"
		"  n_push (1) n_fetch (1)  steps between gradient pushes / parameter fetches\n"
		"  ps_optimizer (adagrad)  the servers' update: sgd (momentum, weight_decay) or\n"
		"                          adagrad\n"
		"  ps_timeout (30)         seconds of silence before a server drops a worker, or\n"
		"                          a worker ends the job for want of a server\n"
		"\n"
		"Multi-rank: mpirun -np N pbx-train CONFIG.yaml (each rank reads its shard;\n"
		"rank 0 writes the outputs).  Without a launcher pbx-train runs as one\n"
		"process without MPI.  With device cuda each rank takes the GPU of its\n"
		"local rank and gradients are averaged with NCCL.\n"
		"\n"
		"SIGTERM or SIGUSR1: checkpoint at the next step, then exit 75 (requeue;\n"
		"run again with --resume).  Outputs: OUTPUT_DIR/metrics.jsonl, TensorBoard\n"
		"events, summary.json, CHECKPOINT_DIR/checkpoint.pbxt (downpour: downpour.json).\n"
		"pbx-train pack writes TFRecord shards (pbx-train pack --help).  See pbx-train(1).\n");
}

int main(int argc, char **argv)
{
	struct pbx_train_config cfg;
	struct pbx_err err = PBX_ERR_INIT;
	const char *path = NULL;
	int rc;

	/* OpenMP workers that spin fight OpenBLAS's threads for the cores;
	 * libgomp reads its policy at load time, so set it and start again. */
	if (!getenv("OMP_WAIT_POLICY")) {
		setenv("OMP_WAIT_POLICY", "passive", 1);
		execv("/proc/self/exe", argv);
		/* no /proc: go on with spinning workers */
	}
	if (argc > 1 && strcmp(argv[1], "pack") == 0)
		return pbx_train_pack_main(argc - 1, argv + 1);
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return fflush(stdout) ? 1 : 0;
		} else if (strcmp(argv[i], "--version") == 0) {
			printf("pbx-train %s (%s)\n", PBX_VERSION, pbx_device_built());
			return fflush(stdout) ? 1 : 0;
		}
	pbx_train_config_defaults(&cfg);
	/* the file first, then the overrides in order */
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--set") == 0 || strcmp(argv[i], "-s") == 0) {
			i++;
			continue;
		}
		if (strncmp(argv[i], "--set=", 6) == 0 || strncmp(argv[i], "--resume", 8) == 0)
			continue;
		if (argv[i][0] == '-' && argv[i][1] != '\0') {
			fprintf(stderr, "pbx-train: unknown option %s\nusage: %s\n", argv[i],
				USAGE);
			goto usage_error;
		}
		if (path) {
			fprintf(stderr,
				"pbx-train: more than one config file (%s, %s)\nusage: %s\n", path,
				argv[i], USAGE);
			goto usage_error;
		}
		path = argv[i];
	}
	if (!path) {
		fprintf(stderr, "usage: %s\n", USAGE);
		goto usage_error;
	}
	if (strcmp(path, "-") != 0 && pbx_train_config_load(&cfg, path, &err) < 0)
		goto fail;
	for (int i = 1; i < argc; i++) {
		const char *a = NULL;
		if (strcmp(argv[i], "--set") == 0 || strcmp(argv[i], "-s") == 0) {
			if (i + 1 >= argc) {
				fprintf(stderr, "pbx-train: --set needs key=value\n");
				goto usage_error;
			}
			a = argv[++i];
		} else if (strncmp(argv[i], "--set=", 6) == 0) {
			a = argv[i] + 6;
		} else if (strcmp(argv[i], "--resume") == 0) {
			a = "resume=auto";
		} else if (strncmp(argv[i], "--resume=", 9) == 0) {
			a = argv[i] + 2;
		}
		if (a && pbx_train_config_set(&cfg, a, &err) < 0)
			goto fail;
	}
	if (pbx_train_config_check(&cfg, &err) < 0)
		goto fail;

	struct pbx_comm_opts co = { (size_t)cfg.bucket_kb << 10, cfg.comm_timeout, 0 };
	struct pbx_comm *comm = pbx_comm_open(&co, &err);
	if (!comm)
		goto fail;
	pbx_train_install_signals();
	if (strcmp(cfg.mode, "downpour") == 0)
#ifdef PBX_TRAIN_HAVE_MPI
		rc = pbx_downpour_run(&cfg, comm, &err);
#else
		rc = pbx_err_setc(&err, PBX_EXIT_USAGE,
				  "key 'mode': downpour needs MPI (rebuild with libopenmpi-dev)");
#endif
	else
		rc = pbx_train_run(&cfg, comm, &err);
	if (rc < 0 && comm->world > 1) {
		/* the other ranks would wait for this one until their timeout:
		 * end them all (rank 0 at once; the others give rank 0's own
		 * message a second to come first) */
		fprintf(stderr, "pbx-train: rank %d of %d: error: %s\n", comm->rank, comm->world,
			err.msg);
		fflush(stderr);
		if (comm->rank != 0)
			sleep(1);
#ifdef PBX_TRAIN_HAVE_MPI
		if (strcmp(cfg.mode, "downpour") == 0)
			pbx_downpour_abort(comm, err.code ? err.code : 1);
#endif
		pbx_comm_abort(comm, err.code ? err.code : 1);
	}
#ifdef PBX_TRAIN_HAVE_MPI
	if (strcmp(cfg.mode, "downpour") == 0)
		pbx_downpour_close(comm, rc < 0 ? (err.code ? err.code : 1) : rc);
	else
#endif
		pbx_comm_close(comm);
	if (rc < 0)
		goto fail;
	pbx_train_config_free(&cfg);
	return rc;
fail:
	fprintf(stderr, "pbx-train: error: %s\n", err.msg);
	pbx_train_config_free(&cfg);
	return err.code ? err.code : 1;
usage_error:
	pbx_train_config_free(&cfg);
	return 2;
}
