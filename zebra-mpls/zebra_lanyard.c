// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * zebra_lanyard: a zebra module that lets FRR's MPLS control plane drive
 * Lanyard's userspace label data plane on a kernel without MPLS.
 *
 * Stock zebra 8.4 turns MPLS off when /proc/sys/net/mpls is missing and,
 * even with MPLS on, sends every LSP and labelled route to the kernel
 * first; the kernel refuses them and a failed context never reaches the
 * FPM provider (dplane_fpm_nl). This module:
 *
 *  1. turns zebra's MPLS support on at startup (zebra_mpls_turned_on), so
 *     ldpd/bgpd/staticd label requests are accepted;
 *  2. registers a dataplane provider that runs before the kernel provider
 *     and marks LSP operations, labelled routes and labelled next-hop
 *     groups "skip kernel", so they reach dplane_fpm_nl (AF_MPLS routes
 *     with RTA_NEWDST, routes with MPLS encap) with success;
 *  3. hands pseudowire install/uninstall operations (FPM has no message
 *     for them) to Lanyard over a unix SOCK_SEQPACKET socket, one text
 *     line per operation, and waits for Lanyard's one-line answer: "ok",
 *     or "err <reason>" — a refusal, no listener or no answer in time
 *     fails the install, so zebra tells ldpd the pseudowire is not
 *     forwarding (and retries every 30 s);
 *  4. keeps a second connection from zebra's main thread ("op=subscribe")
 *     on which Lanyard reports later changes: "op=pw-status status=down"
 *     (a circuit went down after "ok": zebra_pw_install_failure, so ldpd
 *     marks the pseudowire down and zebra retries) and "status=up" (a
 *     refused pseudowire is ready: zebra retries now, not in 30 s);
 *  5. keeps zebra 8.4's optimistic "forwarding" report (zebra_pw_install
 *     tells ldpd FORWARDING before the data plane answered) from flapping
 *     a pseudowire Lanyard keeps refusing: ldpd would tell the remote PE
 *     on every flip, and when both PEs refuse the same pseudowire the two
 *     ldpd/zebra pairs ping-pong hundreds of installs a second;
 *  6. answers an install that repeats, unchanged, one Lanyard already
 *     accepted without asking Lanyard again. zebra 8.4 re-installs every
 *     pseudowire towards a peer each time one more is added
 *     (zebra_register_rnh_pseudowire forces an evaluation of the peer's
 *     tracked next hop, which calls zebra_pw_update on every pseudowire
 *     registered on it), so N pseudowires to one peer cost N^2/2 installs:
 *     4.7 million round trips for 3,072.
 *
 * Load with:  zebra -M dplane_fpm_nl -M /path/zebra_lanyard.so[:SOCKET]
 * SOCKET defaults to /run/lanyard/zebra-pw.sock. The message format is
 * documented in docs/mpls.md ("Pseudowire side channel").
 */

#include "config.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <sys/time.h>
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "lib/zebra.h"
#include "lib/libfrr.h"
#include "lib/module.h"
#include "lib/hook.h"
#include "lib/nexthop.h"
#include "lib/nexthop_group.h"
#include "lib/mpls.h"
#include "lib/pw.h"
#include "zebra/zebra_dplane.h"
#include "zebra/zebra_mpls.h"
#include "zebra/zebra_pw.h"
#include "zebra/zebra_vrf.h"
#include "zebra/zapi_msg.h"

#define LANYARD_DEFAULT_SOCKET "/run/lanyard/zebra-pw.sock"
#define LANYARD_REPLY_TIMEOUT_MS 500
#define LANYARD_LINE_MAX 2048

static const char *prov_name = "lanyard";
static char pw_socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static int pw_fd = -1;

/* Counters, logged at shutdown and at debug level. */
/* Pseudowires whose last install Lanyard refused (written by the data-plane
 * thread, read by the main thread's pw_install hook). "quiet": the hook
 * suppressed zebra's optimistic FORWARDING report for the install under
 * way, so an "ok" must be announced to ldpd afterwards. */
#define LANYARD_REFUSED_MAX 4096
struct refused_pw {
	char ifname[INTERFACE_NAMSIZ];
	vrf_id_t vrf;
	bool quiet;
};
static struct refused_pw refused[LANYARD_REFUSED_MAX];
static unsigned refused_n;
static pthread_mutex_t refused_mtx = PTHREAD_MUTEX_INITIALIZER;
static unsigned long cnt_quiet;

/* Index of (vrf, ifname) in refused[], or -1. Caller holds refused_mtx. */
static int refused_find(vrf_id_t vrf, const char *ifname)
{
	unsigned i;

	for (i = 0; i < refused_n; i++)
		if (refused[i].vrf == vrf && strcmp(refused[i].ifname, ifname) == 0)
			return (int)i;
	return -1;
}

/* Records a refusal (true) or an acceptance (false); returns whether the
 * entry was "quiet" (its install ran without the optimistic report). */
static bool refused_set(vrf_id_t vrf, const char *ifname, bool is_refused)
{
	bool quiet = false;
	int i;

	pthread_mutex_lock(&refused_mtx);
	i = refused_find(vrf, ifname);
	if (i >= 0) {
		quiet = refused[i].quiet;
		if (is_refused)
			refused[i].quiet = false;
		else
			refused[i] = refused[--refused_n];
	} else if (is_refused && refused_n < LANYARD_REFUSED_MAX) {
		strlcpy(refused[refused_n].ifname, ifname,
			sizeof(refused[refused_n].ifname));
		refused[refused_n].vrf = vrf;
		refused[refused_n].quiet = false;
		refused_n++;
	}
	pthread_mutex_unlock(&refused_mtx);
	return quiet;
}

/* Installs Lanyard accepted, by pseudowire: a digest of the line sent
 * (without its status= field, which zebra sets to "forwarding" after the
 * first install). An install with the same digest changes nothing in
 * Lanyard and is answered here (point 6 above). Forgotten on a refusal,
 * an uninstall, a status line from Lanyard about the pseudowire and any
 * reconnection (a restarted Lanyard). Written by the data-plane thread
 * and the main thread, under sent_mtx. Open addressing; a slot, once
 * used, keeps its key (3,072-16,384 pseudowires, never removed). */
#define LANYARD_SENT_SLOTS 32768 /* a power of two; 2 x Lanyard's maximum */
struct sent_pw {
	char ifname[INTERFACE_NAMSIZ];
	vrf_id_t vrf;
	bool used;
	bool valid;
	uint64_t digest;
};
static struct sent_pw *sent;
static unsigned sent_valid;
static pthread_mutex_t sent_mtx = PTHREAD_MUTEX_INITIALIZER;
static unsigned long cnt_pw_same;

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	while (n--)
		h = (h ^ *c++) * 0x100000001b3ULL;
	return h;
}

#define FNV_OFFSET 0xcbf29ce484222325ULL

/* The slot of (vrf, ifname), a free one for it if ADD, or NULL. Caller
 * holds sent_mtx. */
static struct sent_pw *sent_slot(vrf_id_t vrf, const char *ifname, bool add)
{
	uint64_t h = fnv1a(fnv1a(FNV_OFFSET, &vrf, sizeof(vrf)), ifname,
			   strlen(ifname));
	unsigned i;

	if (!sent)
		return NULL;
	for (i = 0; i < LANYARD_SENT_SLOTS; i++) {
		struct sent_pw *s = &sent[(h + i) & (LANYARD_SENT_SLOTS - 1)];

		if (!s->used) {
			if (!add)
				return NULL;
			s->used = true;
			s->vrf = vrf;
			strlcpy(s->ifname, ifname, sizeof(s->ifname));
			return s;
		}
		if (s->vrf == vrf && strcmp(s->ifname, ifname) == 0)
			return s;
	}
	return NULL;
}

/* Lanyard last accepted exactly this install of the pseudowire. */
static bool sent_same(vrf_id_t vrf, const char *ifname, uint64_t digest)
{
	struct sent_pw *s;
	bool same;

	pthread_mutex_lock(&sent_mtx);
	s = sent_slot(vrf, ifname, false);
	same = s && s->valid && s->digest == digest;
	pthread_mutex_unlock(&sent_mtx);
	return same;
}

/* Records Lanyard's answer to an install (OK: accepted with DIGEST), or
 * forgets the pseudowire's last install (!OK). */
static void sent_set(vrf_id_t vrf, const char *ifname, uint64_t digest,
		     bool ok)
{
	struct sent_pw *s;

	pthread_mutex_lock(&sent_mtx);
	s = sent_slot(vrf, ifname, ok);
	if (s) {
		if (ok && !s->valid)
			sent_valid++;
		else if (!ok && s->valid)
			sent_valid--;
		s->valid = ok;
		s->digest = digest;
	}
	pthread_mutex_unlock(&sent_mtx);
}

/* Forgets every install (Lanyard may have restarted). */
static void sent_forget_all(void)
{
	unsigned i;

	pthread_mutex_lock(&sent_mtx);
	if (sent && sent_valid > 0)
		for (i = 0; i < LANYARD_SENT_SLOTS; i++)
			sent[i].valid = false;
	sent_valid = 0;
	pthread_mutex_unlock(&sent_mtx);
}

/* The status connection (zebra's main thread only). */
static struct thread_master *st_master;
static int st_fd = -1;
static struct thread *t_st_read, *t_st_connect;
static unsigned long cnt_st_down, cnt_st_retry;

static unsigned long cnt_skip_lsp, cnt_skip_route, cnt_skip_nh, cnt_pw_ok,
	cnt_pw_fail;

static bool nhg_has_labels(const struct nexthop_group *ng)
{
	const struct nexthop *nh;

	if (!ng)
		return false;
	for (nh = ng->nexthop; nh; nh = nh->next) {
		if (nh->nh_label && nh->nh_label->num_labels > 0)
			return true;
		if (nh->resolved && nh->resolved->nh_label
		    && nh->resolved->nh_label->num_labels > 0)
			return true;
	}
	return false;
}

/* Appends " key=value" printf-style; silently stops at the buffer end. */
static void put(char *buf, size_t len, size_t *off, const char *fmt, ...)
	PRINTFRR(4, 5);
static void put(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*off >= len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *off, len - *off, fmt, ap);
	va_end(ap);
	if (n > 0)
		*off += (size_t)n;
}

static void put_addr(char *buf, size_t len, size_t *off, const char *key,
		     int af, const union g_addr *a)
{
	char s[INET6_ADDRSTRLEN];

	if (!inet_ntop(af, a, s, sizeof(s)))
		snprintf(s, sizeof(s), "?");
	put(buf, len, off, " %s=%s", key, s);
}

/* One "nh=" item per next hop of the route to the peer:
 * nh=<gateway or ->@<ifindex>[/<label>/<label>...] */
static void put_nexthops(char *buf, size_t len, size_t *off, const char *key,
			 const struct nexthop_group *ng)
{
	const struct nexthop *nh;
	char s[INET6_ADDRSTRLEN];
	int i;

	if (!ng)
		return;
	for (nh = ng->nexthop; nh; nh = nh->next) {
		const struct nexthop *r = nh->resolved ? nh->resolved : nh;

		switch (r->type) {
		case NEXTHOP_TYPE_IPV4:
		case NEXTHOP_TYPE_IPV4_IFINDEX:
			inet_ntop(AF_INET, &r->gate.ipv4, s, sizeof(s));
			break;
		case NEXTHOP_TYPE_IPV6:
		case NEXTHOP_TYPE_IPV6_IFINDEX:
			inet_ntop(AF_INET6, &r->gate.ipv6, s, sizeof(s));
			break;
		default:
			snprintf(s, sizeof(s), "-");
			break;
		}
		put(buf, len, off, " %s=%s@%d", key, s, (int)r->ifindex);
		if (nh->nh_label)
			for (i = 0; i < nh->nh_label->num_labels; i++)
				put(buf, len, off, "/%u",
				    (unsigned)nh->nh_label->label[i]);
	}
}

static void pw_close(void)
{
	if (pw_fd >= 0)
		close(pw_fd);
	pw_fd = -1;
}

static int pw_connect(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {
		.tv_sec = LANYARD_REPLY_TIMEOUT_MS / 1000,
		.tv_usec = (LANYARD_REPLY_TIMEOUT_MS % 1000) * 1000,
	};

	if (pw_fd >= 0)
		return 0;
	pw_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (pw_fd < 0)
		return -1;
	strlcpy(sa.sun_path, pw_socket_path, sizeof(sa.sun_path));
	setsockopt(pw_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(pw_fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(pw_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		pw_close();
		return -1;
	}
	return 0;
}

/* Sends one line and reads the answer; true if Lanyard said "ok". */
static bool pw_exchange(const char *line, size_t len, char *why, size_t wlen)
{
	char reply[256];
	ssize_t n;
	int attempt;

	for (attempt = 0; attempt < 2; attempt++) {
		if (pw_connect() < 0) {
			snprintf(why, wlen, "no listener on %s: %s",
				 pw_socket_path, safe_strerror(errno));
			return false;
		}
		if (send(pw_fd, line, len, MSG_NOSIGNAL) == (ssize_t)len)
			break;
		/* A stale connection (Lanyard restarted): reconnect once. */
		pw_close();
		sent_forget_all();
	}
	if (pw_fd < 0) {
		snprintf(why, wlen, "send failed");
		return false;
	}
	n = recv(pw_fd, reply, sizeof(reply) - 1, 0);
	if (n <= 0) {
		snprintf(why, wlen, "%s",
			 n == 0 ? "listener closed" : "no answer in time");
		pw_close();
		return false;
	}
	reply[n] = '\0';
	if (strncmp(reply, "ok", 2) == 0)
		return true;
	snprintf(why, wlen, "%s", reply);
	return false;
}

/* A failed install. zebra hands the context's pseudowire status to
 * zebra_pw_install_failure() (zebra_rib.c handle_pw_result); that status
 * was copied when the install was queued and may still say "forwarding",
 * so set it, or ldpd would never hear that the pseudowire is down. */
struct announce {
	vrf_id_t vrf;
	char ifname[INTERFACE_NAMSIZ];
};

/* Main thread: an install whose optimistic report was suppressed has
 * succeeded; tell ldpd the pseudowire forwards. */
static void announce_forwarding(struct thread *t)
{
	struct announce *a = THREAD_ARG(t);
	struct zebra_vrf *zvrf = zebra_vrf_lookup_by_id(a->vrf);
	struct zebra_pw *pw = zvrf ? zebra_pw_find(zvrf, a->ifname) : NULL;

	if (pw && pw->status == PW_FORWARDING && pw->client)
		zsend_pw_update(pw->client, pw);
	XFREE(MTYPE_TMP, a);
}

/* From the data-plane thread (thread_add_event is thread-safe). */
static void announce_later(vrf_id_t vrf, const char *ifname)
{
	struct announce *a = XCALLOC(MTYPE_TMP, sizeof(*a));

	a->vrf = vrf;
	strlcpy(a->ifname, ifname, sizeof(a->ifname));
	thread_add_event(st_master, announce_forwarding, a, 0, NULL);
}

/* zebra's pw_install hook (main thread), called just before the install
 * is queued and zebra reports FORWARDING to ldpd without waiting for the
 * answer. For a pseudowire Lanyard refused last time and has not said is
 * ready since, that report is suppressed (status pre-set to FORWARDING,
 * so zebra_pw_install skips it): a repeated refusal then changes nothing
 * in ldpd, and an "ok" is announced by announce_forwarding. */
static int lanyard_pw_install(struct zebra_pw *pw)
{
	int i;

	if (pw->status == PW_FORWARDING)
		return 0;
	pthread_mutex_lock(&refused_mtx);
	i = refused_find(pw->vrf_id, pw->ifname);
	if (i >= 0) {
		refused[i].quiet = true;
		pw->status = PW_FORWARDING;
		cnt_quiet++;
	}
	pthread_mutex_unlock(&refused_mtx);
	return 0;
}

static void pw_fail(struct zebra_dplane_ctx *ctx)
{
	dplane_ctx_set_pw_status(ctx, PW_NOT_FORWARDING);
	dplane_ctx_set_status(ctx, ZEBRA_DPLANE_REQUEST_FAILURE);
}

static void pw_handle(struct zebra_dplane_ctx *ctx)
{
	enum dplane_op_e op = dplane_ctx_get_op(ctx);
	const union pw_protocol_fields *pf = dplane_ctx_get_pw_proto(ctx);
	char line[LANYARD_LINE_MAX], why[256];
	size_t off = 0, st_from, st_to;
	int af = dplane_ctx_get_pw_af(ctx);
	vrf_id_t vrf = dplane_ctx_get_vrf(ctx);
	const char *ifname = dplane_ctx_get_ifname(ctx);
	uint64_t digest;

	put(line, sizeof(line), &off,
	    "v=1 op=%s ifname=%s vrf=%u type=%d local=%u remote=%u cw=%d",
	    op == DPLANE_OP_PW_INSTALL ? "pw-install" : "pw-uninstall",
	    ifname, (unsigned)vrf, dplane_ctx_get_pw_type(ctx),
	    (unsigned)dplane_ctx_get_pw_local_label(ctx),
	    (unsigned)dplane_ctx_get_pw_remote_label(ctx),
	    CHECK_FLAG(dplane_ctx_get_pw_flags(ctx), F_PSEUDOWIRE_CWORD) ? 1
									 : 0);
	st_from = off;
	put(line, sizeof(line), &off, " status=%d",
	    dplane_ctx_get_pw_status(ctx));
	st_to = off;
	put_addr(line, sizeof(line), &off, "peer", af,
		 dplane_ctx_get_pw_dest(ctx));
	if (pf) {
		char lsr[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &pf->ldp.lsr_id, lsr, sizeof(lsr));
		put(line, sizeof(line), &off, " pwid=%u lsr=%s vpn=%s",
		    (unsigned)pf->ldp.pwid, lsr,
		    pf->ldp.vpn_name[0] ? pf->ldp.vpn_name : "-");
	}
	put_nexthops(line, sizeof(line), &off, "nh",
		     dplane_ctx_get_pw_primary_nhg(ctx));
	put_nexthops(line, sizeof(line), &off, "backup",
		     dplane_ctx_get_pw_backup_nhg(ctx));
	if (off >= sizeof(line)) {
		/* Truncated: never send half a description. */
		zlog_warn("%s: pseudowire %s: description too long", prov_name,
			  dplane_ctx_get_ifname(ctx));
		if (op == DPLANE_OP_PW_INSTALL)
			pw_fail(ctx);
		cnt_pw_fail++;
		return;
	}
	line[off++] = '\n';
	digest = fnv1a(fnv1a(FNV_OFFSET, line, st_from), line + st_to,
		       off - st_to);
	if (op == DPLANE_OP_PW_INSTALL && sent_same(vrf, ifname, digest)) {
		/* Lanyard holds exactly this already (zebra re-installs
		 * every pseudowire to a peer when one is added). */
		cnt_pw_same++;
		return;
	}

	if (pw_exchange(line, off, why, sizeof(why))) {
		cnt_pw_ok++;
		sent_set(vrf, ifname, digest, op == DPLANE_OP_PW_INSTALL);
		if (op == DPLANE_OP_PW_INSTALL && refused_set(vrf, ifname, false))
			announce_later(vrf, ifname);
		return;
	}
	sent_set(vrf, ifname, 0, false);
	if (op == DPLANE_OP_PW_INSTALL)
		refused_set(vrf, ifname, true);
	cnt_pw_fail++;
	zlog_warn("%s: pseudowire %s %s refused: %s", prov_name,
		  dplane_ctx_get_ifname(ctx),
		  op == DPLANE_OP_PW_INSTALL ? "install" : "uninstall", why);
	/* Only a failed install matters to zebra: it reports the pseudowire
	 * as not forwarding to ldpd and retries. An uninstall always
	 * "succeeds" (the pseudowire is going away either way). */
	if (op == DPLANE_OP_PW_INSTALL)
		pw_fail(ctx);
}

static int lanyard_process(struct zebra_dplane_provider *prov)
{
	struct zebra_dplane_ctx *ctx;
	int counter, limit = dplane_provider_get_work_limit(prov);

	for (counter = 0; counter < limit; counter++) {
		ctx = dplane_provider_dequeue_in_ctx(prov);
		if (!ctx)
			break;

		switch (dplane_ctx_get_op(ctx)) {
		case DPLANE_OP_LSP_INSTALL:
		case DPLANE_OP_LSP_UPDATE:
		case DPLANE_OP_LSP_DELETE:
			dplane_ctx_set_skip_kernel(ctx);
			cnt_skip_lsp++;
			break;
		case DPLANE_OP_ROUTE_INSTALL:
		case DPLANE_OP_ROUTE_UPDATE:
		case DPLANE_OP_ROUTE_DELETE:
			if (nhg_has_labels(dplane_ctx_get_ng(ctx))
			    || nhg_has_labels(dplane_ctx_get_old_ng(ctx))) {
				dplane_ctx_set_skip_kernel(ctx);
				cnt_skip_route++;
			}
			break;
		case DPLANE_OP_NH_INSTALL:
		case DPLANE_OP_NH_UPDATE:
		case DPLANE_OP_NH_DELETE:
			if (nhg_has_labels(dplane_ctx_get_nhe_ng(ctx))) {
				dplane_ctx_set_skip_kernel(ctx);
				cnt_skip_nh++;
			}
			break;
		case DPLANE_OP_PW_INSTALL:
		case DPLANE_OP_PW_UNINSTALL:
			pw_handle(ctx);
			dplane_ctx_set_skip_kernel(ctx);
			break;
		default:
			break;
		}
		dplane_provider_enqueue_out_ctx(prov, ctx);
	}

	if (counter >= limit)
		dplane_provider_work_ready();
	return 0;
}

static int lanyard_finish(struct zebra_dplane_provider *prov, bool early)
{
	if (!early) {
		zlog_info("%s: skipped kernel for %lu LSP, %lu route, %lu nexthop ops; pseudowires %lu ok, %lu failed, %lu unchanged (not sent); status from Lanyard: %lu down, %lu retried; %lu repeated refusals kept quiet",
			  prov_name, cnt_skip_lsp, cnt_skip_route, cnt_skip_nh,
			  cnt_pw_ok, cnt_pw_fail, cnt_pw_same, cnt_st_down,
			  cnt_st_retry, cnt_quiet);
		pw_close();
	}
	return 0;
}

/* Value of KEY in a "k=v k=v" line, copied into OUT; false if absent. */
static bool line_get(const char *line, const char *key, char *out,
		     size_t olen)
{
	size_t klen = strlen(key);
	const char *p = line;

	while (*p) {
		while (*p == ' ')
			p++;
		if (strncmp(p, key, klen) == 0 && p[klen] == '=') {
			size_t n = strcspn(p + klen + 1, " \n");

			if (n >= olen)
				return false;
			memcpy(out, p + klen + 1, n);
			out[n] = '\0';
			return true;
		}
		p += strcspn(p, " ");
	}
	return false;
}

static void st_connect(struct thread *t);

static void st_reconnect_later(long secs)
{
	/* Lanyard may be a new one: installs go to it again. */
	sent_forget_all();
	if (st_fd >= 0)
		close(st_fd);
	st_fd = -1;
	THREAD_OFF(t_st_read);
	thread_add_timer(st_master, st_connect, NULL, secs, &t_st_connect);
}

/* One line from Lanyard on the status connection. */
static void st_apply(const char *line)
{
	char op[32], ifname[INTERFACE_NAMSIZ], status[16], vrf[16];
	struct zebra_vrf *zvrf;
	struct zebra_pw *pw;

	if (!line_get(line, "op", op, sizeof(op))
	    || strcmp(op, "pw-status") != 0
	    || !line_get(line, "ifname", ifname, sizeof(ifname))
	    || !line_get(line, "status", status, sizeof(status)))
		return; /* "ok" to the subscription, or unknown: ignored */
	zvrf = zebra_vrf_lookup_by_id(
		line_get(line, "vrf", vrf, sizeof(vrf)) ? (vrf_id_t)atoi(vrf)
							: VRF_DEFAULT);
	pw = zvrf ? zebra_pw_find(zvrf, ifname) : NULL;
	if (!pw) {
		zlog_warn("%s: status for unknown pseudowire %s", prov_name,
			  ifname);
		return;
	}
	/* Lanyard's state changed since its last "ok": the next install
	 * goes to Lanyard even if it repeats the last one. */
	sent_set(pw->vrf_id, pw->ifname, 0, false);
	if (strcmp(status, "down") == 0 && pw->status == PW_FORWARDING) {
		zlog_notice("%s: pseudowire %s down in Lanyard: %s", prov_name,
			    ifname, line);
		cnt_st_down++;
		/* Tells ldpd (not forwarding) and schedules zebra's retry. */
		zebra_pw_install_failure(pw, PW_NOT_FORWARDING);
	} else if (strcmp(status, "up") == 0 && pw->status != PW_FORWARDING
		   /* zebra_pw_enabled() (static there) for LDP pseudowires;
		    * zebra_pw.c names MPLS_INVALID_LABEL MPLS_NO_LABEL. */
		   && pw->local_label != MPLS_INVALID_LABEL
		   && pw->remote_label != MPLS_INVALID_LABEL
		   && pw->af != AF_UNSPEC) {
		zlog_notice("%s: pseudowire %s ready in Lanyard: retrying now",
			    prov_name, ifname);
		cnt_st_retry++;
		/* Ready now: this install reports as zebra always does. */
		refused_set(pw->vrf_id, pw->ifname, false);
		THREAD_OFF(pw->install_retry_timer);
		zebra_pw_update(pw);
	}
}

static void st_read(struct thread *t)
{
	char buf[LANYARD_LINE_MAX];
	ssize_t n = recv(st_fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		zlog_info("%s: status connection closed; reconnecting",
			  prov_name);
		st_reconnect_later(1);
		return;
	}
	if (n > 0) {
		buf[n] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		if (strncmp(buf, "err", 3) == 0) {
			/* A listener without status support (an older
			 * Lanyard): installs still work; ask again later. */
			zlog_info("%s: no pseudowire status from %s: %s",
				  prov_name, pw_socket_path, buf);
			st_reconnect_later(60);
			return;
		}
		st_apply(buf);
	}
	thread_add_read(st_master, st_read, NULL, st_fd, &t_st_read);
}

/* Connects (again, every second until Lanyard listens) and subscribes. */
static void st_connect(struct thread *t)
{
	static const char sub[] = "v=1 op=subscribe\n";
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	st_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (st_fd < 0) {
		st_reconnect_later(1);
		return;
	}
	strlcpy(sa.sun_path, pw_socket_path, sizeof(sa.sun_path));
	if (connect(st_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0
	    || send(st_fd, sub, sizeof(sub) - 1, MSG_NOSIGNAL | MSG_DONTWAIT)
		       != (ssize_t)(sizeof(sub) - 1)) {
		st_reconnect_later(1);
		return;
	}
	zlog_info("%s: subscribed to pseudowire status on %s", prov_name,
		  pw_socket_path);
	thread_add_read(st_master, st_read, NULL, st_fd, &t_st_read);
}

static int lanyard_late_init(struct thread_master *tm)
{
	int rv;

	if (!mpls_enabled) {
		zlog_notice("%s: turning MPLS on (labels go to Lanyard, not the kernel)",
			    prov_name);
		zebra_mpls_turned_on();
	}
	rv = dplane_provider_register(prov_name, DPLANE_PRIO_PRE_KERNEL,
				      DPLANE_PROV_FLAGS_DEFAULT, NULL,
				      lanyard_process, lanyard_finish, NULL,
				      NULL);
	if (rv != 0)
		zlog_err("%s: dataplane provider registration failed: %d",
			 prov_name, rv);
	else
		zlog_notice("%s: provider registered; pseudowires via %s",
			    prov_name, pw_socket_path);
	st_master = tm;
	thread_add_timer(st_master, st_connect, NULL, 0, &t_st_connect);
	return 0;
}

static int lanyard_module_init(void)
{
	const char *arg = THIS_MODULE->load_args;

	strlcpy(pw_socket_path,
		arg && arg[0] ? arg : LANYARD_DEFAULT_SOCKET,
		sizeof(pw_socket_path));
	/* Without it every install is sent (as before point 6). */
	sent = calloc(LANYARD_SENT_SLOTS, sizeof(*sent));
	hook_register(frr_late_init, lanyard_late_init);
	hook_register(pw_install, lanyard_pw_install);
	return 0;
}

FRR_MODULE_SETUP(.name = "zebra_lanyard", .version = "0.1.0",
		 .description = "Lanyard userspace MPLS data plane glue",
		 .init = lanyard_module_init, );
