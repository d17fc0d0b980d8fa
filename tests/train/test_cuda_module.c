/*
 * test_cuda_module.c - what can be checked of the real CUDA module
 * (pbx-train-cuda.so) without a GPU: it loads with only the symbols
 * pbx-train exports (this program exports the same list), its backend has
 * a forward and a backward for every layer kind and every device hook the
 * trainer calls, it names what it was built for, its model check refuses
 * what cuDNN cannot do (LRN: odd sizes up to 16, k >= 1e-5, beta >= 0.01)
 * naming the layer, and it accepts every built-in model.
 *   usage: train_test_cuda_module MODULE
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "common/tap.h"
#include "train/cuda/cuda.h"
#include "train/model.h"

static struct pbx_model *plan(const struct pbx_layer_spec *s, int n)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_model_opts o = { .max_batch = 4 };
	struct pbx_model *m = pbx_model_plan(s, n, 1, 28, 28, 10, &o, &err);
	if (!m)
		printf("# plan: %s\n", err.msg);
	return m;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s MODULE\n", argv[0]);
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!ok(h != NULL, "the module loads: %s", h ? argv[1] : dlerror()))
		return tap_done();
	const struct pbx_cuda_api *api = dlsym(h, "pbx_cuda_api");
	if (!ok(api && api->abi == PBX_CUDA_ABI, "it exports pbx_cuda_api of ABI %d", PBX_CUDA_ABI))
		return tap_done();
	ok(strstr(api->built(), "cuda (sm_") != NULL, "built: %s", api->built());

	const struct pbx_backend *be = api->backend;
	int complete = be->alloc && be->release && be->loss_forward && be->loss_backward &&
		       be->attach && be->detach && be->set_batch && be->zero_grad && be->clip &&
		       be->step && be->pull && be->push && api->open && api->check_model &&
		       api->grads && api->nccl_attach && api->close;
	ok(complete, "every hook the trainer calls is there");
	int missing = -1;
	for (int k = 0; k < PBX_L_COUNT; k++)
		if (!be->ops[k].forward || !be->ops[k].backward)
			missing = k;
	ok(missing < 0, "a device forward and backward for every layer kind%s%s",
	   missing < 0 ? "" : ", missing: ",
	   missing < 0 ? "" : pbx_layer_kind_name((enum pbx_layer_kind)missing));

	/* every built-in model passes the check */
	const char *names[] = { "mlp", "lenet", "cnn-bn", "mini-alexnet" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const struct pbx_layer_spec *s;
		int n;
		struct pbx_err err = PBX_ERR_INIT;
		pbx_model_builtin(names[i], &s, &n);
		struct pbx_model *m = plan(s, n);
		ok(m && api->check_model(m, &err) == 0,
		   "built-in %s passes the device's model check%s%s", names[i],
		   err.msg[0] ? ": " : "", err.msg);
		pbx_model_free(m);
	}

	/* LRN outside cuDNN's limits: refused, naming the layer */
	static const struct {
		int size;
		float k, beta;
		int good;
	} lrn[] = {
		{ 5, 1.0f, 0.75f, 1 },  { 1, 1.0f, 0.75f, 1 },  { 15, 2.0f, 0.5f, 1 },
		{ 4, 1.0f, 0.75f, 0 },  { 17, 1.0f, 0.75f, 0 }, { 5, 0.0f, 0.75f, 0 },
		{ 5, 1.0f, 0.001f, 0 },
	};
	for (size_t i = 0; i < sizeof(lrn) / sizeof(lrn[0]); i++) {
		struct pbx_layer_spec s[4];
		struct pbx_err err = PBX_ERR_INIT;
		pbx_layer_spec_defaults(&s[0], PBX_L_CONV);
		s[0].out = 4;
		pbx_layer_spec_defaults(&s[1], PBX_L_LRN);
		s[1].size = lrn[i].size;
		s[1].bias = lrn[i].k;
		s[1].beta = lrn[i].beta;
		pbx_layer_spec_defaults(&s[2], PBX_L_FLATTEN);
		pbx_layer_spec_defaults(&s[3], PBX_L_LINEAR);
		struct pbx_model *m = plan(s, 4);
		int rc = m ? api->check_model(m, &err) : -2;
		if (lrn[i].good)
			ok(rc == 0, "lrn size %d k %g beta %g accepted", lrn[i].size,
			   (double)lrn[i].k, (double)lrn[i].beta);
		else
			ok(rc == -1 && err.code == PBX_EXIT_USAGE &&
				   strstr(err.msg,
					  "layer 2 (lrn): device cuda needs an odd size from 1 to 16") !=
					   NULL,
			   "lrn size %d k %g beta %g refused: %s", lrn[i].size, (double)lrn[i].k,
			   (double)lrn[i].beta, err.msg);
		pbx_model_free(m);
	}
	return tap_done();
}
