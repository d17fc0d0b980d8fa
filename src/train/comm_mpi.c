/*
 * comm_mpi.c - the data-parallel comm over MPI (comm.h).
 *
 * Gradients.  The flat buffer of n floats is cut into buckets from its end:
 * bucket k is [max(0, n - (k+1)*bs), n - k*bs).  grads_ready(lo) starts a
 * non-blocking in-place MPI_Iallreduce (sum) for every bucket that lies in
 * [lo, n), then tests the started ones so that MPI progresses them while
 * backward computes the layers before; grads_finish starts what is left,
 * waits, and divides by world.  Every rank starts the same buckets in the
 * same order (the model's walk is the same), as MPI requires.
 *
 * Waiting.  No MPI call blocks: waits poll MPI_Testall (yielding the CPU
 * after a short spin, which matters when ranks share cores; sleeping 1 ms
 * between polls after the first second) against a deadline, and exchange heartbeats on their own communicator (tag 1, one
 * int64: the sender's step): each rank sends one to rank 0 and rank 0 one
 * to each rank at most once a second, so on a timeout rank 0 names the
 * ranks it has not heard from, and the others can name rank 0.  Errors
 * return (MPI_ERRORS_RETURN) and become messages with MPI's error string.
 */
#include "train/comm.h"

#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/buf.h"
#include "util/xalloc.h"

#define HB_TAG     1
#define HB_EVERY_S 1.0

struct mpi_impl {
	MPI_Comm comm; /* collectives */
	MPI_Comm hb;   /* heartbeats */
	double timeout;
	size_t bucket; /* floats per bucket */
	/* the step's gradient buckets */
	float *grads;
	size_t n;
	int nbuckets, started;
	MPI_Request *req; /* nbuckets */
	int cap;
	/* heartbeats */
	int64_t hb_in;
	int64_t *hb_out; /* world: one send buffer per peer (a buffer may
			       * not change while its send is in flight) */
	MPI_Request hb_recv;
	MPI_Request *hb_send; /* world */
	double *heard;        /* world: when each peer was last heard */
	int64_t *peer_step;   /* world: the step it reported */
	double hb_sent_at;
	double t_open;
};

static double mpi_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static struct mpi_impl *impl_of(struct pbx_comm *c)
{
	return c->impl;
}

/* Puts c in the failed state with MPI's words for rc. */
static int mpi_fail_rc(struct pbx_comm *c, int rc, const char *what)
{
	char s[MPI_MAX_ERROR_STRING];
	int len = 0;
	MPI_Error_string(rc, s, &len);
	c->failed = 1;
	pbx_err_set(&c->err,
		    "rank %d: %s at step %lld failed: %s (a peer rank died or is unreachable)",
		    c->rank, what, (long long)c->step, s);
	return -1;
}

/* ------------------------------------------------------------ heartbeats */

static void hb_post_recv(struct pbx_comm *c)
{
	struct mpi_impl *m = impl_of(c);
	MPI_Irecv(&m->hb_in, 1, MPI_INT64_T, c->rank == 0 ? MPI_ANY_SOURCE : 0, HB_TAG, m->hb,
		  &m->hb_recv);
}

static void hb_send_to(struct pbx_comm *c, int peer)
{
	struct mpi_impl *m = impl_of(c);
	int done = 1;
	if (m->hb_send[peer] != MPI_REQUEST_NULL)
		MPI_Test(&m->hb_send[peer], &done, MPI_STATUS_IGNORE);
	if (done) { /* never more than one in flight per peer */
		m->hb_out[peer] = c->step;
		MPI_Isend(&m->hb_out[peer], 1, MPI_INT64_T, peer, HB_TAG, m->hb, &m->hb_send[peer]);
	}
}

/* Receives what has arrived and, once a second, says we are alive. */
static void hb_poll(struct pbx_comm *c)
{
	struct mpi_impl *m = impl_of(c);
	double now = mpi_now();
	int flag = 1;
	MPI_Status st;
	while (flag && m->hb_recv != MPI_REQUEST_NULL) {
		if (MPI_Test(&m->hb_recv, &flag, &st) != MPI_SUCCESS)
			break;
		if (!flag)
			break;
		if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < c->world) {
			m->heard[st.MPI_SOURCE] = now;
			m->peer_step[st.MPI_SOURCE] = m->hb_in;
		}
		hb_post_recv(c);
	}
	if (now - m->hb_sent_at < HB_EVERY_S)
		return;
	m->hb_sent_at = now;
	if (c->rank == 0) {
		for (int p = 1; p < c->world; p++)
			hb_send_to(c, p);
	} else {
		hb_send_to(c, 0);
	}
}

/* The message for a wait that timed out: who has gone quiet. */
static void mpi_timeout_message(struct pbx_comm *c, const char *what, double waited)
{
	struct mpi_impl *m = impl_of(c);
	struct pbx_buf b = PBX_BUF_INIT;
	double now = mpi_now();
	int nsilent = 0;
	for (int p = 0; p < c->world; p++) {
		if (p == c->rank || (c->rank != 0 && p != 0))
			continue;
		if (now - m->heard[p] > m->timeout / 2) {
			pbx_buf_addf(&b, "%srank %d (silent for %.0f s, last at step %lld)",
				     nsilent ? ", " : "", p, now - m->heard[p],
				     (long long)m->peer_step[p]);
			nsilent++;
		}
	}
	if (nsilent)
		pbx_err_set(
			&c->err,
			"rank %d: %s at step %lld did not complete in %.0f s; not answering: %s: stopped, hung or unreachable",
			c->rank, what, (long long)c->step, waited, b.buf);
	else if (c->rank == 0)
		pbx_err_set(
			&c->err,
			"rank 0: %s at step %lld did not complete in %.0f s although every rank is alive: the ranks are out of step",
			what, (long long)c->step, waited);
	else
		pbx_err_set(
			&c->err,
			"rank %d: %s at step %lld did not complete in %.0f s; rank 0 is alive (it names the rank that is not answering)",
			c->rank, what, (long long)c->step, waited);
	pbx_buf_release(&b);
	c->failed = 1;
}

/* Waits for n requests with the deadline; 0 or -1 (c failed). */
static int mpi_wait(struct pbx_comm *c, MPI_Request *r, int n, const char *what)
{
	struct mpi_impl *m = impl_of(c);
	double t0 = mpi_now(), limit = m->timeout;
	for (long spin = 0;; spin++) {
		int flag = 0, rc = MPI_Testall(n, r, &flag, MPI_STATUSES_IGNORE);
		if (rc != MPI_SUCCESS)
			return mpi_fail_rc(c, rc, what);
		if (flag)
			return 0;
		if ((spin & 63) == 0)
			hb_poll(c);
		if (spin < 256)
			continue;
		double waited = mpi_now() - t0;
		if (waited > limit) {
			int quiet = 0;
			for (int p = 0; p < c->world; p++)
				if (p != c->rank && (c->rank == 0 || p == 0) &&
				    mpi_now() - m->heard[p] > m->timeout / 2)
					quiet = 1;
			/* let rank 0 name the culprit first */
			if (c->rank != 0 && !quiet && limit == m->timeout) {
				limit += m->timeout / 2;
				continue;
			}
			mpi_timeout_message(c, what, waited);
			return -1;
		}
		/* non-blocking collectives move only inside MPI_Test: poll
		 * (giving the core away) while the wait is short; sleep once it
		 * is clearly a straggler or a hang */
		if (waited < 1.0) {
			sched_yield();
		} else {
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
		}
	}
}

/* ---------------------------------------------------------- gradients */

static void mpi_bucket(const struct mpi_impl *m, int k, size_t *lo, size_t *hi)
{
	*hi = m->n - (size_t)k * m->bucket;
	*lo = *hi > m->bucket ? *hi - m->bucket : 0;
}

static void mpi_grads_begin(struct pbx_comm *c, float *grads, size_t n)
{
	struct mpi_impl *m = impl_of(c);
	m->grads = grads;
	m->n = n;
	m->nbuckets = (int)((n + m->bucket - 1) / m->bucket);
	if (m->nbuckets > m->cap) {
		m->req = xrealloc(m->req, sizeof(MPI_Request) * (size_t)m->nbuckets);
		m->cap = m->nbuckets;
	}
	for (int k = 0; k < m->nbuckets; k++)
		m->req[k] = MPI_REQUEST_NULL;
	m->started = 0;
	hb_poll(c); /* once a step at least (waits that end at once poll none) */
}

static void mpi_grads_ready(struct pbx_comm *c, size_t lo_ready)
{
	struct mpi_impl *m = impl_of(c);
	while (m->started < m->nbuckets) {
		size_t lo, hi;
		mpi_bucket(m, m->started, &lo, &hi);
		if (lo < lo_ready)
			break;
		int rc = MPI_Iallreduce(MPI_IN_PLACE, m->grads + lo, (int)(hi - lo), MPI_FLOAT,
					MPI_SUM, m->comm, &m->req[m->started]);
		if (rc != MPI_SUCCESS) {
			mpi_fail_rc(c, rc, "gradient allreduce");
			return;
		}
		m->started++;
		c->stats.buckets++;
		if (lo_ready > 0) /* layers before it still to compute */
			c->stats.started_early++;
	}
	if (m->started) { /* let MPI move the started ones along */
		int flag;
		MPI_Testall(m->started, m->req, &flag, MPI_STATUSES_IGNORE);
	}
}

static int mpi_grads_finish(struct pbx_comm *c)
{
	struct mpi_impl *m = impl_of(c);
	double t0 = mpi_now();
	mpi_grads_ready(c, 0);
	if (c->failed || mpi_wait(c, m->req, m->nbuckets, "gradient allreduce") < 0)
		return -1;
	float inv = 1.0f / (float)c->world;
	for (size_t i = 0; i < m->n; i++)
		m->grads[i] *= inv;
	c->stats.exposed_s += mpi_now() - t0;
	c->stats.steps++;
	return 0;
}

/* ---------------------------------------------------- small collectives */

static int mpi_sum(struct pbx_comm *c, double *v, int n)
{
	struct mpi_impl *m = impl_of(c);
	MPI_Request r;
	double t0 = mpi_now();
	int rc = MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, m->comm, &r);
	if (rc != MPI_SUCCESS)
		return mpi_fail_rc(c, rc, "allreduce");
	rc = mpi_wait(c, &r, 1, "allreduce");
	c->stats.other_s += mpi_now() - t0;
	return rc;
}

static int mpi_bcast(struct pbx_comm *c, void *buf, size_t bytes)
{
	struct mpi_impl *m = impl_of(c);
	unsigned char *p = buf;
	size_t off = 0;
	double t0 = mpi_now();
	do { /* in pieces that fit an int count */
		size_t len = bytes - off > (1u << 30) ? (1u << 30) : bytes - off;
		MPI_Request r;
		int rc = MPI_Ibcast(p + off, (int)len, MPI_BYTE, 0, m->comm, &r);
		if (rc != MPI_SUCCESS)
			return mpi_fail_rc(c, rc, "broadcast");
		if (mpi_wait(c, &r, 1, "broadcast") < 0)
			return -1;
		off += len;
	} while (off < bytes);
	c->stats.other_s += mpi_now() - t0;
	return 0;
}

static int mpi_allreduce_floats(struct pbx_comm *c, float *v, size_t n)
{
	struct mpi_impl *m = impl_of(c);
	int rc = MPI_Allreduce(MPI_IN_PLACE, v, (int)n, MPI_FLOAT, MPI_SUM, m->comm);
	return rc == MPI_SUCCESS ? 0 : mpi_fail_rc(c, rc, "MPI_Allreduce");
}

static void mpi_abort(struct pbx_comm *c, int code)
{
	(void)c;
	MPI_Abort(MPI_COMM_WORLD, code);
	exit(code);
}

static void mpi_close(struct pbx_comm *c)
{
	struct mpi_impl *m = impl_of(c);
	if (!c->failed && !c->lossy) {
		/* everyone is done sending heartbeats before anyone stops
		 * receiving them */
		MPI_Request r;
		if (MPI_Ibarrier(m->comm, &r) == MPI_SUCCESS)
			mpi_wait(c, &r, 1, "final barrier");
	}
	if (m->hb_recv != MPI_REQUEST_NULL) {
		MPI_Cancel(&m->hb_recv);
		MPI_Wait(&m->hb_recv, MPI_STATUS_IGNORE);
	}
	for (int p = 0; p < c->world; p++)
		if (m->hb_send[p] != MPI_REQUEST_NULL)
			MPI_Request_free(&m->hb_send[p]);
	free(m->hb_send);
	free(m->hb_out);
	free(m->heard);
	free(m->peer_step);
	free(m->req);
	MPI_Comm_free(&m->hb);
	MPI_Comm_free(&m->comm);
	MPI_Finalize();
}

static const struct pbx_comm_ops mpi_ops = {
	"mpi",     mpi_grads_begin,      mpi_grads_ready, mpi_grads_finish, mpi_sum,
	mpi_bcast, mpi_allreduce_floats, mpi_abort,       mpi_close,
};

#ifdef __SANITIZE_ADDRESS__
/* Open MPI's plugins leave allocations LeakSanitizer reports at exit and
 * no suppression can name (the plugins are unloaded by then).  LSan asks
 * this hook before its check: off once MPI started, on for plain runs. */
static int mpi_started;
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
	return mpi_started;
}
#define MPI_STARTED() (mpi_started = 1)
#else
#define MPI_STARTED() ((void)0)
#endif

struct pbx_comm *pbx_comm_mpi_open(const struct pbx_comm_opts *o, struct pbx_err *err)
{
	int provided = 0, inited = 0;
	MPI_STARTED();
	MPI_Initialized(&inited);
	if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
		pbx_err_set(err, "MPI_Init_thread failed");
		return NULL;
	}
	struct pbx_comm *c = xcalloc(1, sizeof(*c));
	struct mpi_impl *m = xcalloc(1, sizeof(*m));
	MPI_Comm node;
	c->impl = m;
	c->ops = &mpi_ops;
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_dup(MPI_COMM_WORLD, &m->comm);
	MPI_Comm_dup(MPI_COMM_WORLD, &m->hb);
	MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
	MPI_Comm_set_errhandler(m->hb, MPI_ERRORS_RETURN);
	MPI_Comm_rank(m->comm, &c->rank);
	MPI_Comm_size(m->comm, &c->world);
	MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node);
	MPI_Comm_rank(node, &c->local_rank);
	MPI_Comm_size(node, &c->local_world);
	MPI_Comm_free(&node);
	m->timeout = o->timeout_s > 0 ? o->timeout_s : 300.0;
	m->bucket = (o->bucket_bytes ? o->bucket_bytes : (size_t)1 << 20) / sizeof(float);
	if (m->bucket < 1)
		m->bucket = 1;
	m->hb_send = xcalloc((size_t)c->world, sizeof(MPI_Request));
	m->hb_out = xcalloc((size_t)c->world, sizeof(int64_t));
	m->heard = xcalloc((size_t)c->world, sizeof(double));
	m->peer_step = xcalloc((size_t)c->world, sizeof(int64_t));
	m->t_open = mpi_now();
	for (int p = 0; p < c->world; p++) {
		m->hb_send[p] = MPI_REQUEST_NULL;
		m->heard[p] = m->t_open;
	}
	m->hb_recv = MPI_REQUEST_NULL;
	if (c->world > 1)
		hb_post_recv(c);
	m->hb_sent_at = m->t_open - HB_EVERY_S;
	return c;
}
