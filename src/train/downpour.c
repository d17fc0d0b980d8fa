/*
 * downpour.c - Downpour SGD over MPI point-to-point messages (downpour.h):
 * the parameter server's loop, and the worker's side, which plugs into the
 * training loop of train.c as its optimiser step (struct pbx_train_hook).
 *
 * Messages (MPI_BYTE on a duplicate of MPI_COMM_WORLD): a struct dp_hdr,
 * then hdr.n floats.
 *   INIT    first worker -> server: the initial shard
 *   PUSH    worker -> server: gradients summed over n_push steps
 *   FETCH   worker -> server: asks for the shard (no floats)
 *   PARAMS  server -> worker: the shard, hdr.version = updates applied
 *   DONE    worker -> server: the worker has finished
 *   ACK     server -> worker: struct dp_stats, the server's figures
 * A server keeps one receive posted per worker (any tag), so a worker that
 * is slow to send never holds the others up, and polls them all with
 * MPI_Testsome.  Nothing ever blocks: waits poll against a deadline.
 */
#include "train/downpour.h"

#include <jansson.h>
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train/train.h"
#include "util/xalloc.h"

/* The exit status pbx_downpour_close's timer exits with. */
static volatile sig_atomic_t dp_exit_code;

enum { TAG_INIT = 101, TAG_PUSH, TAG_FETCH, TAG_PARAMS, TAG_DONE, TAG_ACK };

#define DP_LOG_EVERY   500 /* server updates between staleness lines */
#define DP_ADAGRAD_EPS 1e-7f

struct dp_hdr {
	int64_t version; /* PUSH: the version last fetched; PARAMS: the current */
	int64_t step;    /* the worker's step count */
	double lr;       /* PUSH: the learning rate to apply */
	int64_t n;       /* floats after the header */
};

/* A server's figures (sent in ACK, written to downpour.json). */
struct dp_stats {
	int64_t updates, fetches, lost, finished;
	int64_t stale_max;
	double stale_sum;
};

static double dp_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Between polls: yield at first, then sleep 100 us (ranks share cores). */
static void dp_nap(double waited)
{
	struct timespec ts = { 0, 100000 };
	if (waited < 1e-3)
		sched_yield();
	else
		nanosleep(&ts, NULL);
}

/* Server s's shard of n parameters: [*lo, *hi). */
static void dp_shard(size_t n, int nservers, int s, size_t *lo, size_t *hi)
{
	*lo = n * (size_t)s / (size_t)nservers;
	*hi = n * (size_t)(s + 1) / (size_t)nservers;
}

/* Polls until every request completes (0), the deadline passes (-1, some
 * still pending) or MPI fails (-2). */
static int dp_wait(MPI_Request *req, int n, double timeout)
{
	double t0 = dp_now();
	int flag = 0;
	for (;;) {
		if (MPI_Testall(n, req, &flag, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
			return -2;
		if (flag)
			return 0;
		double waited = dp_now() - t0;
		if (waited > timeout)
			return -1;
		dp_nap(waited);
	}
}

/* ============================================================= server */

struct dp_server {
	MPI_Comm comm;
	const struct pbx_train_config *cfg;
	int rank, nworkers, first; /* workers are ranks first..first+nworkers-1 */
	size_t n;                  /* shard floats */
	float *p, *state;          /* parameters; momentum or Adagrad sums */
	int64_t version;
	size_t msg_bytes;
	unsigned char **in; /* per worker: posted receive buffer */
	MPI_Request *rreq;
	unsigned char **out; /* per worker: reply buffer */
	MPI_Request *sreq;
	double *seen; /* per worker: last message */
	int *status;  /* per worker: 0 live, 1 done, 2 lost */
	struct dp_stats st;
	double log_stale_sum;
	int64_t log_stale_max, log_n;
};

/* Waits for the first worker's INIT (the shard size comes with it). */
static int dp_server_init(struct dp_server *s, struct pbx_err *err)
{
	MPI_Status mst;
	int flag = 0, bytes;
	double t0 = dp_now(), wait = s->cfg->ps_timeout * 4 > 120 ? s->cfg->ps_timeout * 4 : 120;
	while (!flag) {
		if (MPI_Iprobe(s->first, TAG_INIT, s->comm, &flag, &mst) != MPI_SUCCESS)
			return pbx_err_set(
				err,
				"parameter server rank %d: MPI error waiting for the initial parameters",
				s->rank);
		if (!flag && dp_now() - t0 > wait)
			return pbx_err_set(
				err,
				"parameter server rank %d: no initial parameters from worker rank %d in %.0f s",
				s->rank, s->first, wait);
		if (!flag)
			dp_nap(dp_now() - t0);
	}
	MPI_Get_count(&mst, MPI_BYTE, &bytes);
	if (bytes < (int)sizeof(struct dp_hdr) ||
	    (bytes - sizeof(struct dp_hdr)) % sizeof(float) != 0)
		return pbx_err_set(err, "parameter server rank %d: bad INIT message (%d bytes)",
				   s->rank, bytes);
	s->msg_bytes = (size_t)bytes;
	s->n = (s->msg_bytes - sizeof(struct dp_hdr)) / sizeof(float);
	unsigned char *buf = xmalloc(s->msg_bytes);
	MPI_Recv(buf, bytes, MPI_BYTE, s->first, TAG_INIT, s->comm, MPI_STATUS_IGNORE);
	s->p = xmalloc((s->n ? s->n : 1) * sizeof(float));
	memcpy(s->p, buf + sizeof(struct dp_hdr), s->n * sizeof(float));
	s->state = xcalloc(s->n ? s->n : 1, sizeof(float));
	free(buf);
	return 0;
}

static void dp_server_post(struct dp_server *s, int w)
{
	MPI_Irecv(s->in[w], (int)s->msg_bytes, MPI_BYTE, s->first + w, MPI_ANY_TAG, s->comm,
		  &s->rreq[w]);
}

/* The update of one push: SGD (momentum, weight decay) or Adagrad. */
static void dp_server_apply(struct dp_server *s, const float *g, float lr)
{
	const struct pbx_train_config *c = s->cfg;
	float wd = (float)c->weight_decay, mom = (float)c->momentum;
	if (strcmp(c->ps_optimizer, "adagrad") == 0) {
		for (size_t i = 0; i < s->n; i++) {
			float gi = g[i] + wd * s->p[i];
			s->state[i] += gi * gi;
			s->p[i] -= lr * gi / (sqrtf(s->state[i]) + DP_ADAGRAD_EPS);
		}
	} else {
		for (size_t i = 0; i < s->n; i++) {
			float gi = g[i] + wd * s->p[i];
			s->state[i] = mom * s->state[i] + gi;
			s->p[i] -= lr * s->state[i];
		}
	}
}

/* Sends `bytes` of s->out[w] with `tag` (the previous reply to w first
 * completes: a worker posts its receive before it asks). */
static int dp_server_reply(struct dp_server *s, int w, int tag, size_t bytes)
{
	if (dp_wait(&s->sreq[w], 1, s->cfg->ps_timeout) < 0)
		return -1;
	return MPI_Isend(s->out[w], (int)bytes, MPI_BYTE, s->first + w, tag, s->comm,
			 &s->sreq[w]) == MPI_SUCCESS
		       ? 0
		       : -1;
}

static void dp_server_log(struct dp_server *s)
{
	fprintf(stderr,
		"pbx-train: parameter server rank %d: %lld updates, staleness mean %.2f max %lld over the last %lld\n",
		s->rank, (long long)s->st.updates,
		s->log_n ? s->log_stale_sum / (double)s->log_n : 0.0, (long long)s->log_stale_max,
		(long long)s->log_n);
	s->log_stale_sum = 0;
	s->log_stale_max = s->log_n = 0;
}

/* Handles worker w's message (tag, bytes) sitting in s->in[w]. */
static void dp_server_handle(struct dp_server *s, int w, int tag, int bytes)
{
	struct dp_hdr h;
	memcpy(&h, s->in[w], sizeof(h));
	s->seen[w] = dp_now();
	if (s->status[w] == 2) {
		fprintf(stderr, "pbx-train: parameter server rank %d: worker rank %d is back\n",
			s->rank, s->first + w);
		s->status[w] = 0;
		s->st.lost--;
	}
	if (tag == TAG_PUSH && bytes == (int)s->msg_bytes) {
		int64_t stale = s->version - h.version;
		dp_server_apply(s, (const float *)(s->in[w] + sizeof(h)), (float)h.lr);
		s->version++;
		s->st.updates++;
		s->st.stale_sum += (double)stale;
		s->log_stale_sum += (double)stale;
		s->st.stale_max = stale > s->st.stale_max ? stale : s->st.stale_max;
		s->log_stale_max = stale > s->log_stale_max ? stale : s->log_stale_max;
		if (++s->log_n == DP_LOG_EVERY)
			dp_server_log(s);
	} else if (tag == TAG_FETCH) {
		struct dp_hdr r = { s->version, 0, 0.0, (int64_t)s->n };
		s->st.fetches++;
		if (dp_wait(&s->sreq[w], 1, s->cfg->ps_timeout) == 0) {
			memcpy(s->out[w], &r, sizeof(r));
			memcpy(s->out[w] + sizeof(r), s->p, s->n * sizeof(float));
			s->sreq[w] = MPI_REQUEST_NULL;
			dp_server_reply(s, w, TAG_PARAMS, s->msg_bytes);
		}
	} else if (tag == TAG_DONE) {
		s->status[w] = 1;
		s->st.finished++;
		if (dp_wait(&s->sreq[w], 1, s->cfg->ps_timeout) == 0) {
			memcpy(s->out[w], &s->st, sizeof(s->st));
			dp_server_reply(s, w, TAG_ACK, sizeof(s->st));
		}
		return; /* no more receives from w */
	} else {
		fprintf(stderr,
			"pbx-train: parameter server rank %d: ignored a message with tag %d (%d bytes) from rank %d\n",
			s->rank, tag, bytes, s->first + w);
	}
	dp_server_post(s, w);
}

/* Marks workers silent for ps_timeout as lost; 1 while any is live. */
static int dp_server_watch(struct dp_server *s)
{
	double now = dp_now();
	int live = 0;
	for (int w = 0; w < s->nworkers; w++) {
		if (s->status[w] == 0 && now - s->seen[w] > s->cfg->ps_timeout) {
			s->status[w] = 2;
			s->st.lost++;
			fprintf(stderr,
				"pbx-train: parameter server rank %d: lost worker rank %d (nothing heard for %.0f s, after %lld updates); going on with the others\n",
				s->rank, s->first + w, now - s->seen[w], (long long)s->st.updates);
		}
		live += s->status[w] == 0;
	}
	return live > 0;
}

static void dp_server_free(struct dp_server *s)
{
	for (int w = 0; w < s->nworkers; w++) {
		if (s->rreq && s->rreq[w] != MPI_REQUEST_NULL) {
			MPI_Cancel(&s->rreq[w]);
			MPI_Request_free(&s->rreq[w]);
		}
		if (s->sreq && s->sreq[w] != MPI_REQUEST_NULL)
			MPI_Request_free(&s->sreq[w]);
		if (s->in)
			free(s->in[w]);
		if (s->out)
			free(s->out[w]);
	}
	free(s->in);
	free(s->out);
	free(s->rreq);
	free(s->sreq);
	free(s->seen);
	free(s->status);
	free(s->p);
	free(s->state);
}

static int dp_serve(MPI_Comm comm, const struct pbx_train_config *cfg, int rank, int world,
		    struct pbx_err *err)
{
	struct dp_server s;
	int rc = -1;
	memset(&s, 0, sizeof(s));
	s.comm = comm;
	s.cfg = cfg;
	s.rank = rank;
	s.first = cfg->ps_ranks;
	s.nworkers = world - cfg->ps_ranks;
	if (dp_server_init(&s, err) < 0)
		goto out;
	fprintf(stderr, "pbx-train: parameter server rank %d: %zu parameters (%s), %d workers\n",
		rank, s.n, cfg->ps_optimizer, s.nworkers);
	s.in = xcalloc((size_t)s.nworkers, sizeof(*s.in));
	s.out = xcalloc((size_t)s.nworkers, sizeof(*s.out));
	s.rreq = xmalloc((size_t)s.nworkers * sizeof(MPI_Request));
	s.sreq = xmalloc((size_t)s.nworkers * sizeof(MPI_Request));
	s.seen = xmalloc((size_t)s.nworkers * sizeof(double));
	s.status = xcalloc((size_t)s.nworkers, sizeof(int));
	int *idx = xmalloc((size_t)s.nworkers * sizeof(int));
	MPI_Status *mst = xmalloc((size_t)s.nworkers * sizeof(MPI_Status));
	for (int w = 0; w < s.nworkers; w++) {
		size_t ob = s.msg_bytes > sizeof(struct dp_stats) ? s.msg_bytes
								  : sizeof(struct dp_stats);
		s.in[w] = xmalloc(s.msg_bytes);
		s.out[w] = xmalloc(ob);
		s.sreq[w] = MPI_REQUEST_NULL;
		s.seen[w] = dp_now();
		dp_server_post(&s, w);
	}
	double idle_since = dp_now();
	while (dp_server_watch(&s)) {
		int nd = 0;
		if (MPI_Testsome(s.nworkers, s.rreq, &nd, idx, mst) != MPI_SUCCESS) {
			pbx_err_set(err, "parameter server rank %d: MPI error while receiving",
				    rank);
			break;
		}
		if (nd == MPI_UNDEFINED || nd == 0) {
			dp_nap(dp_now() - idle_since);
			continue;
		}
		for (int i = 0; i < nd; i++) {
			int bytes;
			MPI_Get_count(&mst[i], MPI_BYTE, &bytes);
			dp_server_handle(&s, idx[i], mst[i].MPI_TAG, bytes);
		}
		idle_since = dp_now();
	}
	free(idx);
	free(mst);
	dp_wait(s.sreq, s.nworkers, cfg->ps_timeout);
	dp_server_log(&s);
	fprintf(stderr,
		"pbx-train: parameter server rank %d: done: %lld updates, %lld fetches, staleness mean %.2f max %lld; %lld of %d workers finished, %lld lost\n",
		rank, (long long)s.st.updates, (long long)s.st.fetches,
		s.st.updates ? s.st.stale_sum / (double)s.st.updates : 0.0,
		(long long)s.st.stale_max, (long long)s.st.finished, s.nworkers,
		(long long)s.st.lost);
	rc = 0;
out:
	dp_server_free(&s);
	return rc;
}

/* ============================================================= worker */

struct dp_worker {
	MPI_Comm comm;
	const struct pbx_train_config *cfg;
	int rank, nservers, is_first;
	size_t n;
	float *acc;                  /* gradients summed since the last push */
	unsigned char **push, **got; /* per server: send and receive buffers */
	struct dp_hdr *ask;          /* per server: FETCH message */
	MPI_Request *preq, *freq;    /* per server: push; fetch (2 each) */
	int64_t *version;            /* per server: version last fetched */
	int64_t steps, since_push, since_fetch, pushes, fetches;
	int started;
	double stale_steps_sum; /* steps since the fetch, at each push */
	double wait_s;          /* time spent waiting for servers */
};

static size_t dp_bytes(size_t n, int nservers, int s)
{
	size_t lo, hi;
	dp_shard(n, nservers, s, &lo, &hi);
	return sizeof(struct dp_hdr) + (hi - lo) * sizeof(float);
}

/* Error for requests still pending after a wait: names the server. */
static int dp_worker_timeout(struct dp_worker *w, MPI_Request *req, int per, int rc,
			     const char *what, struct pbx_err *err)
{
	int s = 0;
	for (int i = 0; i < w->nservers * per; i++) {
		int flag = 1;
		if (req[i] != MPI_REQUEST_NULL)
			MPI_Test(&req[i], &flag, MPI_STATUS_IGNORE);
		if (!flag) {
			s = i / per;
			break;
		}
	}
	if (rc == -2)
		return pbx_err_set(err,
				   "worker rank %d: MPI error in %s with parameter server rank %d",
				   w->rank, what, s);
	return pbx_err_set(
		err,
		"worker rank %d: parameter server rank %d has not answered for %.0f s (%s at step %lld): the job cannot go on without it",
		w->rank, s, w->cfg->ps_timeout, what, (long long)w->steps);
}

static int dp_worker_fetch(struct dp_worker *w, float *params, double timeout, struct pbx_err *err)
{
	double t0 = dp_now();
	for (int s = 0; s < w->nservers; s++) {
		w->ask[s] = (struct dp_hdr){ 0, w->steps, 0.0, 0 };
		MPI_Irecv(w->got[s], (int)dp_bytes(w->n, w->nservers, s), MPI_BYTE, s, TAG_PARAMS,
			  w->comm, &w->freq[2 * s]);
		MPI_Isend(&w->ask[s], sizeof(w->ask[s]), MPI_BYTE, s, TAG_FETCH, w->comm,
			  &w->freq[2 * s + 1]);
	}
	int rc = dp_wait(w->freq, 2 * w->nservers, timeout);
	if (rc < 0)
		return dp_worker_timeout(w, w->freq, 2, rc, "fetching parameters", err);
	for (int s = 0; s < w->nservers; s++) {
		size_t lo, hi;
		struct dp_hdr h;
		dp_shard(w->n, w->nservers, s, &lo, &hi);
		memcpy(&h, w->got[s], sizeof(h));
		memcpy(params + lo, w->got[s] + sizeof(h), (hi - lo) * sizeof(float));
		w->version[s] = h.version;
	}
	w->fetches++;
	w->since_fetch = 0;
	w->wait_s += dp_now() - t0;
	return 0;
}

/* How long to wait for the servers: ps_timeout, but longer at first,
 * while they wait for the first worker's initial parameters. */
static double dp_worker_deadline(const struct dp_worker *w)
{
	double t = w->cfg->ps_timeout;
	return w->fetches > 0 || t * 4 > 120 ? t : 120;
}

static int dp_worker_push(struct dp_worker *w, double lr, struct pbx_err *err)
{
	double t0 = dp_now();
	int rc = dp_wait(w->preq, w->nservers, dp_worker_deadline(w));
	if (rc < 0)
		return dp_worker_timeout(w, w->preq, 1, rc, "pushing gradients", err);
	for (int s = 0; s < w->nservers; s++) {
		size_t lo, hi;
		dp_shard(w->n, w->nservers, s, &lo, &hi);
		struct dp_hdr h = { w->version[s], w->steps, lr, (int64_t)(hi - lo) };
		memcpy(w->push[s], &h, sizeof(h));
		memcpy(w->push[s] + sizeof(h), w->acc + lo, (hi - lo) * sizeof(float));
		MPI_Isend(w->push[s], (int)dp_bytes(w->n, w->nservers, s), MPI_BYTE, s, TAG_PUSH,
			  w->comm, &w->preq[s]);
	}
	memset(w->acc, 0, w->n * sizeof(float));
	w->stale_steps_sum += (double)w->since_fetch;
	w->pushes++;
	w->since_push = 0;
	w->wait_s += dp_now() - t0;
	return 0;
}

/* First call: allocate; the first worker hands the servers its initial
 * parameters (every worker starts from the same seed's, so the others
 * need not wait for them). */
static int dp_worker_start(struct dp_worker *w, float *params, size_t n, struct pbx_err *err)
{
	w->n = n;
	w->acc = xcalloc(n ? n : 1, sizeof(float));
	for (int s = 0; s < w->nservers; s++) {
		w->push[s] = xmalloc(dp_bytes(n, w->nservers, s));
		w->got[s] = xmalloc(dp_bytes(n, w->nservers, s));
	}
	w->started = 1;
	if (!w->is_first)
		return 0;
	for (int s = 0; s < w->nservers; s++) {
		size_t lo, hi;
		dp_shard(n, w->nservers, s, &lo, &hi);
		struct dp_hdr h = { 0, 0, 0.0, (int64_t)(hi - lo) };
		memcpy(w->push[s], &h, sizeof(h));
		memcpy(w->push[s] + sizeof(h), params + lo, (hi - lo) * sizeof(float));
		MPI_Isend(w->push[s], (int)dp_bytes(n, w->nservers, s), MPI_BYTE, s, TAG_INIT,
			  w->comm, &w->preq[s]);
	}
	int rc = dp_wait(w->preq, w->nservers, w->cfg->ps_timeout);
	return rc < 0 ? dp_worker_timeout(w, w->preq, 1, rc, "sending the initial parameters", err)
		      : 0;
}

/* pbx_train_hook.step */
static int dp_worker_step(void *ctx, float *params, float *grads, size_t n, double lr,
			  struct pbx_err *err)
{
	struct dp_worker *w = ctx;
	if (!w->started) {
		if (dp_worker_start(w, params, n, err) < 0)
			return -1;
		/* the servers' parameters (the first worker's: after a resume
		 * they are its checkpoint's) replace this worker's own before
		 * its first push; its first gradient is dropped */
		if (!w->is_first) {
			w->steps++;
			return dp_worker_fetch(w, params, dp_worker_deadline(w), err);
		}
	}
	for (size_t i = 0; i < n; i++)
		w->acc[i] += grads[i];
	w->steps++;
	w->since_push++;
	w->since_fetch++;
	if (w->since_push >= w->cfg->n_push && dp_worker_push(w, lr, err) < 0)
		return -1;
	if (w->since_fetch >= w->cfg->n_fetch &&
	    dp_worker_fetch(w, params, dp_worker_deadline(w), err) < 0)
		return -1;
	return 0;
}

/* pbx_train_hook.sync: the servers' parameters, before an evaluation. */
static int dp_worker_sync(void *ctx, float *params, size_t n, struct pbx_err *err)
{
	struct dp_worker *w = ctx;
	if (!w->started && dp_worker_start(w, params, n, err) < 0)
		return -1;
	if (w->since_push > 0 && dp_worker_push(w, 0.0, err) < 0)
		return -1;
	return dp_worker_fetch(w, params, dp_worker_deadline(w), err);
}

/* Tells every server this worker is done; their figures come back. */
static int dp_worker_done(struct dp_worker *w, struct dp_stats *st, struct pbx_err *err)
{
	MPI_Request *req = xmalloc(2 * (size_t)w->nservers * sizeof(MPI_Request));
	int rc = dp_wait(w->preq, w->nservers, w->cfg->ps_timeout);
	for (int s = 0; s < w->nservers && rc == 0; s++) {
		w->ask[s] = (struct dp_hdr){ 0, w->steps, 0.0, 0 };
		MPI_Irecv(&st[s], sizeof(st[s]), MPI_BYTE, s, TAG_ACK, w->comm, &req[2 * s]);
		MPI_Isend(&w->ask[s], sizeof(w->ask[s]), MPI_BYTE, s, TAG_DONE, w->comm,
			  &req[2 * s + 1]);
	}
	if (rc == 0)
		rc = dp_wait(req, 2 * w->nservers, w->cfg->ps_timeout);
	if (rc < 0)
		dp_worker_timeout(w, req, 2, rc, "saying goodbye", err);
	free(req);
	return rc < 0 ? -1 : 0;
}

/* OUTPUT_DIR/downpour.json: the run's shape and the servers' figures. */
static int dp_write_json(const struct dp_worker *w, const struct dp_stats *st, double wall_s,
			 struct pbx_err *err)
{
	json_t *o = json_object(), *servers = json_array();
	int64_t upd = 0, smax = 0;
	double ssum = 0;
	for (int s = 0; s < w->nservers; s++) {
		json_t *j = json_object();
		json_object_set_new(j, "rank", json_integer(s));
		json_object_set_new(j, "updates", json_integer(st[s].updates));
		json_object_set_new(j, "fetches", json_integer(st[s].fetches));
		json_object_set_new(
			j, "staleness_mean",
			json_real(st[s].updates ? st[s].stale_sum / (double)st[s].updates : 0.0));
		json_object_set_new(j, "staleness_max", json_integer(st[s].stale_max));
		json_object_set_new(j, "workers_finished", json_integer(st[s].finished));
		json_object_set_new(j, "workers_lost", json_integer(st[s].lost));
		json_array_append_new(servers, j);
		upd += st[s].updates;
		ssum += st[s].stale_sum;
		smax = st[s].stale_max > smax ? st[s].stale_max : smax;
	}
	json_object_set_new(o, "mode", json_string("downpour"));
	json_object_set_new(o, "ps_ranks", json_integer(w->nservers));
	json_object_set_new(o, "ps_optimizer", json_string(w->cfg->ps_optimizer));
	json_object_set_new(o, "n_push", json_integer(w->cfg->n_push));
	json_object_set_new(o, "n_fetch", json_integer(w->cfg->n_fetch));
	json_object_set_new(o, "staleness_mean", json_real(upd ? ssum / (double)upd : 0.0));
	json_object_set_new(o, "staleness_max", json_integer(smax));
	json_object_set_new(o, "worker_steps", json_integer(w->steps));
	json_object_set_new(o, "worker_pushes", json_integer(w->pushes));
	json_object_set_new(o, "worker_fetches", json_integer(w->fetches));
	json_object_set_new(o, "worker_steps_since_fetch_mean",
			    json_real(w->pushes ? w->stale_steps_sum / (double)w->pushes : 0.0));
	json_object_set_new(o, "worker_wait_seconds", json_real(w->wait_s));
	json_object_set_new(o, "wall_seconds", json_real(wall_s));
	json_object_set_new(o, "servers", servers);
	char *path = xasprintf("%s/downpour.json", w->cfg->output_dir);
	int rc = json_dump_file(o, path, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
	json_decref(o);
	if (rc < 0)
		pbx_err_set(err, "cannot write %s", path);
	free(path);
	return rc < 0 ? -1 : 0;
}

static int dp_work(MPI_Comm comm, const struct pbx_train_config *cfg, struct pbx_comm *mc,
		   struct pbx_err *err)
{
	struct dp_worker w;
	struct pbx_train_config wc = *cfg; /* shallow: the strings stay cfg's */
	int S = cfg->ps_ranks, rc;
	double t0 = dp_now();
	memset(&w, 0, sizeof(w));
	w.comm = comm;
	w.cfg = cfg;
	w.rank = mc->rank;
	w.nservers = S;
	w.is_first = mc->rank == S;
	w.push = xcalloc((size_t)S, sizeof(*w.push));
	w.got = xcalloc((size_t)S, sizeof(*w.got));
	w.ask = xcalloc((size_t)S, sizeof(*w.ask));
	w.preq = xmalloc((size_t)S * sizeof(MPI_Request));
	w.freq = xmalloc(2 * (size_t)S * sizeof(MPI_Request));
	w.version = xcalloc((size_t)S, sizeof(int64_t));
	for (int s = 0; s < S; s++)
		w.preq[s] = w.freq[2 * s] = w.freq[2 * s + 1] = MPI_REQUEST_NULL;

	/* the training loop as one process: rank 0 of it (outputs) only for
	 * the first worker; the others neither evaluate nor write */
	struct pbx_comm *self = pbx_comm_self();
	self->rank = mc->rank - S;
	self->local_world = mc->local_world;
	if (!w.is_first)
		wc.eval_every = 0;
	struct pbx_train_hook hook = { &w, dp_worker_step, dp_worker_sync, mc->rank - S,
				       mc->world - S };
	rc = pbx_train_run_hooked(&wc, self, &hook, err);
	if (rc >= 0) {
		struct dp_stats *st = xcalloc((size_t)S, sizeof(*st));
		if (dp_worker_done(&w, st, err) < 0 ||
		    (w.is_first && dp_write_json(&w, st, dp_now() - t0, err) < 0))
			rc = -1;
		free(st);
	}
	pbx_comm_close(self);
	for (int s = 0; s < S; s++) {
		free(w.push[s]);
		free(w.got[s]);
	}
	free(w.push);
	free(w.got);
	free(w.ask);
	free(w.preq);
	free(w.freq);
	free(w.version);
	free(w.acc);
	return rc;
}

int pbx_downpour_run(const struct pbx_train_config *cfg, struct pbx_comm *comm, struct pbx_err *err)
{
	MPI_Comm dc;
	int rc;
	if (strcmp(comm->ops->name, "mpi") != 0 || comm->world <= cfg->ps_ranks)
		return pbx_err_setc(
			err, PBX_EXIT_USAGE,
			"key 'mode': downpour needs more MPI ranks than ps_ranks (%d), got %d (start it with mpirun --enable-recovery -np N)",
			cfg->ps_ranks, comm->world);
	comm->lossy = 1; /* a lost worker would never reach a final barrier */
	MPI_Comm_dup(MPI_COMM_WORLD, &dc);
	MPI_Comm_set_errhandler(dc, MPI_ERRORS_RETURN);
	if (comm->rank < cfg->ps_ranks)
		rc = dp_serve(dc, cfg, comm->rank, comm->world, err);
	else
		rc = dp_work(dc, cfg, comm, err);
	return rc; /* dc is left to MPI_Finalize: freeing it would wait for lost ranks */
}

/* The name of process pid (/proc/PID/comm), or "" if unknown. */
static void dp_proc_name(pid_t pid, char *name, size_t len)
{
	char path[64];
	FILE *f;
	name[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%ld/comm", (long)pid);
	if (!(f = fopen(path, "r")))
		return;
	if (!fgets(name, (int)len, f))
		name[0] = '\0';
	name[strcspn(name, "\n")] = '\0';
	fclose(f);
}

void pbx_downpour_abort(struct pbx_comm *comm, int code)
{
	char parent[32];
	pid_t pp = getppid();
	dp_proc_name(pp, parent, sizeof(parent));
	if (strcmp(parent, "mpirun") == 0 || strcmp(parent, "orterun") == 0 ||
	    strcmp(parent, "orted") == 0)
		kill(pp, SIGTERM);
	pbx_comm_abort(comm, code);
}

static void dp_finalize_timeout(int sig)
{
	static const char msg[] =
		"pbx-train: MPI_Finalize did not return within 30 s (waiting for a lost rank?): exiting without it\n";
	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0) {
		/* nothing left to tell */
	}
	_exit(dp_exit_code);
}

void pbx_downpour_close(struct pbx_comm *comm, int rc)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = dp_finalize_timeout;
	sigemptyset(&sa.sa_mask);
	dp_exit_code = rc;
	fflush(NULL);
	sigaction(SIGALRM, &sa, NULL);
	alarm(30);
	pbx_comm_close(comm);
	alarm(0);
}
