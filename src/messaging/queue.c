/*
 * queue.c - the queues between places, and how a place finds, handles and
 * waits for what is queued to it.
 *
 * THE QUEUES
 *
 * For every ordered pair (sender index s, receiver index r) of a domain
 * there are two single-producer single-consumer queues
 * (messaging_internal.h).  They belong to the indexes, not to the places:
 * whichever place occupies s writes them and whichever occupies r reads
 * them, and the private positions (out[s][r] of the sender, in[r][s] of
 * the receiver) carry over from one occupant of an index to the next.
 *
 *   nf[16]   the notification FIFO of Barrelfish TN-9: 64-bit entries on
 *            two cache lines, 0 = empty, else chan << 32 | rtag << 1 | 1.
 *            s fills the entry at its private nf_tail if it is 0; r reads
 *            the entry at its private nf_head and writes 0 back.  An entry
 *            that is not 0 at nf_tail means the FIFO is full.  A poll's
 *            empty check reads only the line that holds nf_head.
 *   ring[R]  the active-message ring: 16-byte slots, a message is a head
 *            slot {seq, meta, arg} and ceil(len/12) payload slots, whose
 *            first word is 0.  A head is valid for position p iff its
 *            seq is rtag << 2 | lap(p) << 1 | 1, lap(p) = (p / R) & 1.
 *            The consumer only reads slots (Barrelfish UMP's epoch idea,
 *            with the lap as the epoch), and publishes how far it has read
 *            in the link's ack word on its own line; the sender reads ack
 *            only when its cached view says the ring is full.  So in
 *            steady state a message costs one line transfer per 4 slots
 *            and no shared index at all.
 *
 * rtag is the low 30 bits of the receiving occupant's generation: an
 * entry written for an earlier occupant of r does not match the current
 * one (WHY A LATE ENTRY REACHES NO LATER OCCUPANT).  Entries carry no
 * sender tag: the link's sender-generation words name the sender (WHO
 * SENT IT).
 *
 * One lap bit is enough.  The sender writes each position once per lap,
 * in order: a message its payload positions (first word 0) and then its
 * head, a batch one head per position.  The one rewrite is after a
 * retract (S3, below), which first CASes the head back to 0 and rewinds
 * the tail, so that those positions are written again in the same lap
 * (the retracted message's payload slots beyond the new message keep
 * their word 0).  The sender writes position p only when p - ack < R,
 * and ack never passes the receiver's head h.  So when the receiver looks
 * at position h, the slot holds the last write of position h - if the
 * sender got there: this lap's head, a payload word, a retracted 0 - or
 * else that of position h - R, the previous lap: a head with the other
 * lap bit, a payload word or 0 (or, in the first lap, a new domain's 0).
 * Only this lap's head for this receiver matches.  Positions are 32-bit
 * and wrap; R divides 2^32, so laps alternate across the wrap too.
 *
 * Each receiver has a hint bitmap, one bit per sender.  Only sender s
 * sets bit s (fetch_or); only r clears bits (exchange with 0).
 *
 * Each place publishes its state in its waiter slot (src/waiter):
 * RUNNING, POLLING (in nemo_place_wait, watching memory) or SLEEPING (in
 * futex_wait on the domain's shared word, or about to be), and its 64-bit
 * status word: gen << 2 | FREE / ACTIVE / LEAVING.
 *
 * SEND (s to r; nemo__msg_send, notify_send, nemo__publish)
 *
 *   S0  st := load(r.status, acquire); not ACTIVE of the id's generation
 *       -> ESRCH, nothing written.
 *   G1  only before this occupant's first entry on the queue (WHO SENT
 *       IT): wait until its predecessors' entries there are given back.
 *   G2  store(link's sender-generation word, own generation, release).
 *   S1  write the entry; its seq / FIFO word last, with release: this is
 *       what makes everything s wrote before (G2 included) visible to r.
 *   S2  (no fence: see THE ASYMMETRIC BARRIER; a seq_cst fence where
 *       membarrier is not available)
 *   S3  if load(r.status) != st: r is leaving (or left).  A ring
 *       entry may have been read by an ordinary drain before the leave
 *       (reads leave the slot as it was): if load(link.ack, acquire) is
 *       past the entry, it was delivered -> 0.  Otherwise try to take the
 *       entry back, CAS(seq or FIFO word: entry -> 0).  Success: nobody
 *       consumed it and nobody will (no later occupant's rtag matches)
 *       -> ESRCH.  Failure: r's final drain consumed it -> 0, delivered;
 *       no kick needed.  (FIFO entries need no ack check: an ordinary
 *       drain writes 0 back, so the CAS fails.)
 *   -- with NEMO_MORE the send stops here; S4-S5 run at the next
 *      publishing send or nemo_flush.
 *   P   atomic_thread_fence(seq_cst): orders every entry written so far
 *       before the hint load (one fence per publication, not per entry).
 *   S4  if load(hint word, seq_cst) has bit s: stop.  Else
 *       fetch_or(hint word, bit s, seq_cst) and go on.  (A set bit was set
 *       by s itself, earlier, and r has not cleared it yet: r has not
 *       looked at s's queues since, and will; s already kicked then.)
 *   S5  kick (kick.c): load(r's waiter state, seq_cst) decides nothing,
 *       FUTEX_WAKE or signal.  NEMO_PUSH goes to S5 even when S4 stops.
 *
 * RECEIVE (r; nemo__drain)
 *
 *   D1  the hot queues (senders found non-empty recently): consume what
 *       is valid.  A polling receiver sees a hot sender's entry with one
 *       line transfer, before the sender has even set its hint bit.
 *   D2  for each hint word that is not 0: x := exchange(word, 0,
 *       seq_cst); drain every queue whose bit is in x.
 *   Consuming an entry (drain_link):
 *   D3  load(seq or FIFO word at the private head, acquire); stop unless
 *       it is valid for this position and this receiver;
 *   D4  load(the queue's sender-generation word, relaxed): the sender
 *       is make_id(s, that generation);
 *   D5  give the entry back: FIFO store(word, 0, release); ring: advance
 *       the private head, and store(ack, head, release) every R/4
 *       slots and at the end of the drain (the final drain first CASes
 *       each entry to 0, acq_rel, for S3's race).
 *   The entry is copied out and given back before the handler runs, so
 *   a handler may itself poll or wait without seeing its own message
 *   again, and may wait for room in a queue to the same sender.
 *
 * WAIT (r; nemo_place_wait with the ops below, through nemo__wait_loop,
 * the waiter layer's one decision of how long to poll)
 *
 *   W1  state := POLLING; poll: if nemo__pending() (any hint word, or a
 *       hot queue non-empty) then drain; return once something was handled.
 *   B1  seen := load(domain's bseq, seq_cst)
 *   W2  exchange(state, SLEEPING, seq_cst)
 *   W3  if nemo__pending() (seq_cst loads): state := RUNNING, drain.
 *   W4  futex_wait_bitset(bseq, seen, own bit): the waiter layer's SHARED
 *       WORD (a kick CASes state SLEEPING -> RUNNING, then bumps bseq and
 *       wakes the bit), so that a broadcast wakes all its sleepers with
 *       one syscall (nemo__kick_many)
 *   W5  state := RUNNING; drain; done if something was handled, else B1.
 *   W6  leaving the wait: store(state, RUNNING, seq_cst), and if interrupt
 *       mode is on, check nemo__pending() once more and drain.
 *
 * WHY NO WAKE-UP IS LOST
 *
 * S4;S5 and W2;W3 are the store-buffering pattern (as in waiter.c): s
 * stores the hint bit then loads state; r stores state then loads the
 * hint; all seq_cst.  One of the two loads sees the other's store: r sees
 * the bit and does not sleep, or s sees SLEEPING and wakes it (the
 * waiter layer's CAS, then its bump of bseq and FUTEX_WAKE_BITSET: B1
 * read bseq before W2, and the CAS follows W2, so W4 either finds bseq
 * changed and returns at once or sleeps before the bump and is woken by
 * its bit).  When S4 finds the bit already set, s skips S5:
 * that bit's own setting was followed by its own S5, and r clears it only
 * in D2, whose exchange reads s's set bit; then s's load at S4, which
 * read the bit before that exchange, precedes it in the seq_cst order,
 * so the entry written before the fence P is visible to D2's loads that
 * follow the exchange: r drains it.  W6 does the same for interrupt mode, where
 * RUNNING (not SLEEPING) is the state that needs a kick: a sender that
 * read POLLING does not signal, and the place sees its hint at W6.
 * models/place.pml checks this with spin, with the broken variants
 * "kick before hint", "check before publishing SLEEPING", "bseq read
 * after publishing SLEEPING".
 *
 * WHY A SEND RACING A LEAVE IS DELIVERED XOR FAILED
 *
 * nemo_place_leave: L1 status := LEAVING (seq_cst), then the asymmetric
 * barrier; L2 the final drain: every queue, consuming each entry by
 * CAS(entry -> 0) instead of a read, passes until one finds nothing;
 * L3 status := FREE.  A sender whose S3 read ACTIVE wrote its entry
 * before the barrier took effect on its CPU (below), so its entry is
 * visible to L2, which consumes it: delivered.  A sender whose S3 reads
 * otherwise races L2 with its own CAS on the same word: exactly one CAS
 * wins - consumed (the sender returns 0) or taken back (ESRCH).  Later
 * occupants never consume the taken-back entry: its rtag is the old
 * generation's.  A ring entry read by an ordinary drain before L1 is not
 * retracted although its seq is still valid: every drain publishes ack
 * before it returns, hence before L1, and a sender that saw L1 (or
 * anything after it) sees that ack at S3.  models/place.pml -DLEAVE
 * checks this (-DRING, the read-only ring; spin found the retract of an
 * already-handled entry before the ack check was added), and that the
 * broken variants "no re-check at S3" (a message lost), "plain reads in
 * the final drain" (handled and failed) and "no barrier after L1" (a
 * message lost) are caught.
 *
 * WHO SENT IT
 *
 * Every entry of queue (s -> r) was written by an occupant of s, and the
 * occupants of s write it one after the other: an occupant leaves only
 * outside any send, and the next one joins after that.  Each queue has a
 * sender-generation word on the link's ack line (ring_sgen, nf_sgen):
 * the sender writes it once per occupant, the receiver reads it once per
 * entry from a line it writes itself (ack).  The sender keeps a private
 * copy of what its index last stored (out.ring_gen, out.nf_gen), so a
 * send compares two private words and goes on.  Only a new occupant's
 * first entry on the queue does G1 and G2:
 *
 *   G1  wait until every entry its predecessors wrote on the queue has
 *       been given back: ring: load(link.ack, acquire) == its tail;
 *       FIFO: load(entry at nf_tail - 1, acquire) == 0 (the receiver
 *       empties entries in order; a retract rewound nf_tail past its own
 *       entry).  It waits as a send waits for room in a full queue
 *       (wait_room: it serves its own queues meanwhile; NEMO_NONBLOCK
 *       gives EAGAIN; the receiver leaving gives ESRCH; counted in
 *       full_waits).  A handler run while it waits may claim the queue
 *       first: then it is claimed.
 *   G2  store(word, its generation, release).
 *
 * Why D4 reads the generation of the entry's writer W.  W stored the word
 * (G2) before the entry (S1, release) and D3 loaded the entry with
 * acquire, so G2 happens before D4, and D4 reads W's value or a later
 * one (coherence).  A later value is stored only by a later occupant at
 * its G2, after its G1 read the give-back (D5, release) of W's last entry
 * or of a later one: the ack only grows, the FIFO is emptied in order,
 * and each D5 is sequenced after the D4 of its entry and of every entry
 * before it.  So the D4 of each of W's entries happens before the later
 * G2 and cannot read it.  (The occupants of r continue each other's
 * positions: one's L3 and the next one's join, under the domain lock,
 * order the earlier one's D4s before the later one's D5s.)  Gen 0 never
 * occurs (domain.c skips it at the 48-bit wrap), so a new domain's zero
 * word names nobody and the first occupant's G1 finds ack == tail == 0.
 * The cost: nothing per entry for a place that keeps its index (the
 * receiver's extra load hits its own line); a new occupant waits at most
 * until the receiver has handled what the previous occupant sent there,
 * as if the queue were full.  models/place.pml -DGEN checks the handover
 * (and -DGEN -DBROKEN_NO_GEN_WAIT that without G1 a handler names the
 * wrong sender).
 *
 * WHY A LATE ENTRY REACHES NO LATER OCCUPANT
 *
 * A sender writes the rtag of the generation it read at S0.  If S3 reads
 * the same status, that occupant is still there and takes the entry
 * (above).  If not, the entry is retracted or was delivered - but
 * between S1 and the retract it sits at the receiver's head position,
 * where a later occupant of r may look (it continues the positions, and
 * the lap bit matches).  Its D3 rejects the entry because the rtag
 * differs, unless its generation equals the writer's modulo 2^30: index r
 * would have to be left and joined a multiple of 2^30 times (about 10^9)
 * while this one sender is stopped between S0 and S3.  Ids (48-bit
 * generations) repeat only after 2^48 joins of one index.
 *
 * THE ASYMMETRIC BARRIER
 *
 * S1;S3 against L1;L2 is again store-then-load on both sides, which
 * needs a full fence on both.  But senders send millions of times a
 * second and places leave rarely, so the fence is moved to the leaver:
 * after L1 it calls membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which
 * makes every running thread of the process pass a full barrier before
 * it returns (a thread that is not running is past one already: the
 * context switch).  A sender's S3 is then a plain load: if it read the
 * old status, it did so before its barrier point, and its entry store,
 * earlier in program order, was visible at that point, before L2 looks.
 * (liburcu's urcu-membarrier and folly's asymmetricHeavyBarrier use the
 * same trade.)  Measured on the 2-vCPU VM: the per-message seq_cst fence
 * cost the batched sender about two thirds of its throughput, because it
 * waits for the store to the line the consumer is reading.  Where
 * membarrier is unavailable (old kernel, seccomp) or NEMO_MEMBARRIER=0,
 * nemo__asym is false and every send fences at S2 instead.
 * models/place.pml -DLEAVE models the sender's entry store as buffered
 * (x86-TSO) until a fence, a locked instruction or the leaver's barrier.
 *
 * BACKPRESSURE
 *
 * A full ring or FIFO never drops: a blocking send from outside a
 * handler waits for room while draining the sender's own queues (so
 * cycles of full queues make progress); NEMO_NONBLOCK returns EAGAIN.  G1
 * waits the same way.  A send from a handler does not wait (OVERFLOW).
 * (EDEADLK, for a handler nested more than 8 deep in such waits, is kept
 * as a guard; handlers no longer enter them.)
 *
 * OVERFLOW
 *
 * Why.  A handler that waits for room runs other handlers meanwhile, and
 * those may wait in turn: the worker pool whose handlers reply to a
 * client that is busy sending tasks nests until the depth limit, and the
 * replies failed with EDEADLK (thousands of 100,000).  Alternatives
 * weighed: credits in every send (a shared counter per pair: a line
 * transfer per message, and the user still picks the window); a reply
 * slot reserved per request (the requester must know its replies in
 * advance; a handler may send anything, not only replies); refusing the
 * send (what failed).  Chosen: a handler never waits, and what does not
 * fit is kept by the sender, in order, in memory only it touches.
 *
 * The overflow of a place: an array of entries {dest id, kind (ring or
 * FIFO), meta, arg, payload} in send order, [ovf_head, ovf_tail), with
 * ovf_n not yet delivered, and per receiver index the counts out.ovf_ring
 * and out.ovf_nf.  Only the owner thread touches it: in its nemo calls,
 * or from the interrupt handler, which runs handlers only when the
 * thread is in no nemo call - so a flush pass and a push never overlap.
 * It is allocated with mmap (safe in a signal handler, unlike malloc),
 * grows by doubling, and squeezes out delivered entries when at least
 * half are delivered.
 *
 *   K1  a send in a handler (hdepth > 0), without NEMO_NONBLOCK: if
 *       nothing is kept for that receiver and queue, try the send with
 *       NEMO_NONBLOCK; EAGAIN (full, or G1 not yet possible) or something
 *       already kept -> append an entry (ENOBUFS at overflow_max), return
 *       0.  Later sends to the same queue append behind it: order.
 *   K2  flush (nemo__ovf_flush): one pass in order; each entry re-resolves
 *       its receiver (S0) and is sent with NEMO_NONBLOCK | NEMO_MORE; an
 *       EAGAIN marks that receiver's queue stuck for the rest of the pass
 *       (its later entries stay behind it); ESRCH (the receiver left) or
 *       ENOENT (a notification handler gone) drops the entry, counted in
 *       overflow_dropped and logged under NEMO_DEBUG; then one
 *       publication (S4, S5) per receiver that got something.  Run by
 *       nemo_poll, every try of nemo_place_wait, every round of a wait for
 *       room, the end of an interrupt, and nemo_place_leave (which waits
 *       until everything is delivered or dropped).
 *   K3  a send from outside a handler to a receiver with kept entries on
 *       that queue first waits for them (flush, serving its own queues).
 *   K4  nemo_place_wait does not sleep while ovf_n > 0: nobody would
 *       wake it when room appears (receivers do not kick senders).  It
 *       yields and tries again.
 *
 * THE BACKPRESSURE.  Kept entries alone would only move the unbounded
 * queue: a client that sends 10^6 tasks and never waits leaves each
 * worker holding its share of the replies (the pool reached the default
 * bound, 65536, at 10^6 tasks).  So a place that keeps entries for r says
 * so: link(r <- s).held = 1 while out.ovf_ring + out.ovf_nf > 0 (a relaxed
 * store at the first entry and after the last; on the line r reads for
 * its own queue, so a client pays one load that hits its cache).  A send
 * from r to s outside a handler that finds held set waits as for a full
 * queue - draining its own queues, which makes room for the kept replies
 * - until s has delivered them.  The flag is a hint for a wait that
 * polls (no sleep depends on it), so relaxed order is enough.  In the
 * request/reply pattern this bounds what a worker keeps for a client by
 * what that client had queued to it: one ring of tasks.  Cycles cannot
 * deadlock: every place that waits on held serves its own queues, which
 * is what the holder needs to flush.  NEMO_NONBLOCK sends do not wait on
 * held: then only overflow_max bounds the overflow.
 *
 * What is not guaranteed: a kept send whose receiver leaves first is
 * dropped (counted); its sender was told 0, as a receiver that left just
 * after taking a message would not have handled it either.  A place in
 * interrupt mode that computes for a long time without a nemo call keeps
 * its entries until its next call or interrupt.
 *
 * THE FILE DESCRIPTOR
 *
 * nemo_place_fd gives the place an eventfd (efd) for event loops.  The
 * place counts as waiting on it while fd_armed = 1: from the end of
 * nemo_place_fd or nemo_poll (and of nemo_place_wait, once the place has
 * a descriptor) until its next nemo_poll or nemo_place_wait.
 *
 *   F1  arm: store(fd_armed, 1, seq_cst)
 *   F2  if ovf_n or nemo__pending() (seq_cst loads of the hint words):
 *       if exchange(fd_armed, 0) == 1, write the eventfd ourselves and
 *       fetch_add(fd_writes, 1, release): the loop comes back at once
 *   F3  a kicker (kick.c; only after S4 set its hint bit, or NEMO_PUSH)
 *       that reads the place RUNNING with fd_armed = 1 (seq_cst):
 *       fetch_add(fd_kickers, 1); if exchange(fd_armed, 0) == 1: write
 *       the eventfd, then fetch_add(fd_writes, 1, release);
 *       fetch_sub(fd_kickers, 1, release)
 *   F4  on entry to nemo_poll / nemo_place_wait: exchange(fd_armed, 0)
 *   F5  if load(fd_writes, acquire) is ahead of fd_read (the writes read
 *       back so far): read the eventfd and add its value to fd_read
 *   F6  leave: exchange(fd_armed, 0), wait until fd_kickers is 0, close
 *
 * No message is missed: S4;F3 and F1;F2 are the store-buffering pattern,
 * all seq_cst, so the kicker sees the place armed (and writes), or F2
 * sees the hint (and writes itself); a hint that was already set when S4
 * looked was set by a sender that went through F3 itself, or is seen by
 * F2.  Exactly one of the exchanges takes an arming, so a place gets at
 * most one write per arming.  The descriptor is not left readable for
 * nothing: a write is counted after it is made, so F5 reads only when the
 * eventfd holds at least what it counts, and reading takes all of it; a
 * write made but not yet counted at F5 is read by the next nemo_poll (the
 * descriptor is readable, so the loop comes back).  F6 against F3: a
 * kicker whose exchange took the arming incremented fd_kickers before,
 * and F6's exchange comes after it in fd_armed's order, so F6 waits for
 * that kicker's write before closing (a write to a closed, reused
 * descriptor would reach someone else's file).  models/placefd.pml checks
 * this with spin (and that arming without F2, or F5 only when the flag
 * was taken, are caught).  Cost: one write(2) for the sender when the
 * place is armed, none while it is inside nemo_poll; the receiver pays
 * epoll_wait and one read(2) per wake-up.
 */
#define _GNU_SOURCE
#include "messaging_internal.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#define NEMO__SERVE_DEPTH_MAX 8
#define NEMO__PREFETCH_SLOTS 16     /* 4 lines ahead */

static inline uint32_t slots_for(size_t len)
{
	return 1u + (uint32_t)((len + 11) / 12);
}

/* ------------------------------------------------------------ busy */

void nemo__busy_enter(nemo_place *me)
{
	int b = atomic_load_explicit(&me->busy, memory_order_relaxed);
	atomic_store_explicit(&me->busy, b + 1, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
}

void nemo__busy_exit(nemo_place *me)
{
	atomic_signal_fence(memory_order_seq_cst);
	int b = atomic_load_explicit(&me->busy, memory_order_relaxed) - 1;
	if (b > 0) {
		atomic_store_explicit(&me->busy, b, memory_order_relaxed);
		return;
	}
	/* Leaving the outermost call: run what an interrupt deferred.  The
	 * check after clearing busy closes the window in which a signal
	 * sees busy set but we have already looked at irq_pending. */
	for (;;) {
		/* A plain load first: a locked exchange on every send and poll
		 * costs more than the rest of a batched send. */
		if (atomic_load_explicit(&me->irq_pending, memory_order_relaxed) &&
		    atomic_exchange_explicit(&me->irq_pending, 0, memory_order_relaxed))
			nemo__drain(me, NEMO_AM_CTX_POLL, false);
		atomic_store_explicit(&me->busy, 0, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst);
		if (!atomic_load_explicit(&me->irq_pending, memory_order_relaxed))
			return;
		atomic_store_explicit(&me->busy, 1, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst);
	}
}

/* ------------------------------------------------------------ lookup */

nemo_place *nemo__dest(struct nemo_domain *d, nemo_place_id id, uint64_t *st)
{
	unsigned idx = nemo_place_index(id);
	if (id == NEMO_PLACE_NONE || idx >= d->P)
		return NULL;
	nemo_place *p = &d->places[idx];
	uint64_t s = atomic_load_explicit(&p->status, memory_order_acquire);
	if (s != nemo__status(nemo__id_gen(id), NEMO__ST_ACTIVE))
		return NULL;
	*st = s;
	return p;
}

/* ----------------------------------------------------------- publish */

/* S4 for one destination (after the fence P): set our hint bit there
 * unless it is set already.  Returns whether S5 must follow: the bit was
 * clear (our queue turned non-empty since r last looked), or push. */
static bool hint_set(nemo_place *me, unsigned r, bool push)
{
	me->out_row[r].deferred = 0;
	_Atomic uint64_t *w = nemo__hint_row(me->d, r) + me->idx / 64;
	uint64_t bit = 1ull << (me->idx % 64);
	if (atomic_load_explicit(w, memory_order_seq_cst) & bit) {
		if (!push)
			NEMO__PCOUNT(me, c_kicks_skipped);
		return push;
	}
	atomic_fetch_or_explicit(w, bit, memory_order_seq_cst);
	return true;
}

void nemo__publish(nemo_place *me, unsigned r, bool push)
{
	NEMO__FENCE();                                                       /* P */
	if (hint_set(me, r, push))                                           /* S4 */
		nemo__kick(me, &me->d->places[r]);                           /* S5 */
}

void nemo__publish_many(nemo_place *me, const unsigned *rs, size_t n, bool push)
{
	nemo_place *need[64];
	size_t nn = 0;
	NEMO__FENCE();                                                       /* P */
	for (size_t i = 0; i < n; i++) {
		if (!hint_set(me, rs[i], push))                              /* S4 */
			continue;
		if (nn == sizeof need / sizeof need[0]) {
			nemo__kick_many(me, need, nn);
			nn = 0;
		}
		need[nn++] = &me->d->places[rs[i]];
	}
	nemo__kick_many(me, need, nn);                                       /* S5 */
}

int nemo_flush(nemo_place_id dest)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	struct nemo_domain *d = me->d;
	int err = 0;
	nemo__busy_enter(me);
	if (dest == NEMO_PLACE_ALL) {
		for (unsigned r = 0; r < d->P; r++)
			if (nemo__out_of(d, me->idx, r)->deferred)
				nemo__publish(me, r, false);
	} else {
		uint64_t st;
		if (nemo__dest(d, dest, &st))
			nemo__publish(me, nemo_place_index(dest), false);
		else
			err = ESRCH;
	}
	nemo__busy_exit(me);
	return err;
}

/* ------------------------------------------------------- waiting room */

/* The queue to dst is full (or still holds a previous occupant's
 * entries: WHO SENT IT): wait for room, serving our own queues.
 * room(arg) says whether there is room now.  Returns 0, ESRCH (dst is
 * leaving: nothing more can reach it), EAGAIN, EDEADLK. */
static int wait_room(nemo_place *me, nemo_place *dst, uint64_t st, unsigned r, unsigned flags,
		     bool (*room)(void *), void *arg)
{
	if (flags & NEMO_NONBLOCK)
		return EAGAIN;
	if (me->serve_depth >= NEMO__SERVE_DEPTH_MAX)
		return nemo__fail(EDEADLK, "send", "the queue to place index %u is full, and this send runs in a "
				  "handler nested %d deep in waits for room: it may not wait again", r, me->serve_depth);
	NEMO__PCOUNT(me, c_full_waits);
	/* Make sure r knows about what fills its queue (deferred sends). */
	nemo__publish(me, r, false);
	for (unsigned n = 1;; n++) {
		if (room(arg))
			return 0;
		if (atomic_load_explicit(&dst->status, memory_order_acquire) != st)
			return nemo__fail(ESRCH, "send", "place index %u left while this send waited for room: "
					  "not delivered", r);
		me->serve_depth++;
		nemo__drain(me, NEMO_AM_CTX_WAIT, false);
		me->serve_depth--;
		if (me->ovf_n)
			nemo__ovf_flush(me);
		nemo_cpu_relax();
		/* Oversubscribed: the receiver may need this CPU to make room. */
		if (n % 64 == 0)
			sched_yield();
	}
}

/* ------------------------------------------- first send (WHO SENT IT) */

/* Before this occupant's first entry on a queue whose sender-generation
 * word names another: wait until that occupant's entries there are all
 * given back (G1), then store our generation (G2). */
struct idle {
	nemo__out *o;
	nemo__link *lk;
	uint64_t gen;
};

static bool ring_idle(void *p)
{
	struct idle *q = p;
	if (q->o->ring_gen == q->gen)
		return true;        /* a handler run while we waited claimed it */
	q->o->ack_seen = atomic_load_explicit(&q->lk->ack, memory_order_acquire);    /* G1 */
	return q->o->ack_seen == q->o->tail;
}

static bool nf_idle(void *p)
{
	struct idle *q = p;
	if (q->o->nf_gen == q->gen)
		return true;
	_Atomic uint64_t *e = &q->lk->nf[(q->o->nf_tail - 1) % NEMO_NOTIFY_FIFO_LEN];
	return atomic_load_explicit(e, memory_order_acquire) == 0;                   /* G1 */
}

/* Claim the ring (ring = true) or the FIFO of link lk for me: 0, or the
 * error of wait_room (EAGAIN, ESRCH, EDEADLK). */
static __attribute__((noinline)) int claim(nemo_place *me, nemo_place *dst, uint64_t st, unsigned r,
					   unsigned flags, nemo__out *o, nemo__link *lk, bool ring)
{
	struct idle q = { o, lk, me->gen };
	bool (*idle)(void *) = ring ? ring_idle : nf_idle;
	if (!idle(&q)) {
		int err = wait_room(me, dst, st, r, flags, idle, &q);
		if (err)
			return err;
	}
	if (ring && o->ring_gen != me->gen) {
		atomic_store_explicit(&lk->ring_sgen, me->gen, memory_order_release);     /* G2 */
		o->ring_gen = me->gen;
	} else if (!ring && o->nf_gen != me->gen) {
		atomic_store_explicit(&lk->nf_sgen, me->gen, memory_order_release);       /* G2 */
		o->nf_gen = me->gen;
	}
	return 0;
}

/* ---------------------------------------------------------- ring send */

struct ring_room {
	nemo__out *o;
	nemo__link *lk;
	uint32_t need, R;
};

static bool ring_has_room(void *p)
{
	struct ring_room *rr = p;
	rr->o->ack_seen = atomic_load_explicit(&rr->lk->ack, memory_order_acquire);
	return rr->o->tail + rr->need - rr->o->ack_seen <= rr->R;
}

/* S3 found the receiver leaving: was the ring entry with head hs and
 * seq, ending before position end, delivered?  Yes if the receiver's ack
 * passed it (an ordinary drain read it: every drain publishes ack before
 * it returns, hence before L1, whose store S3 has just seen), or if our
 * CAS fails (the final drain took it).  No if the CAS takes it back. */
static bool ring_delivered(nemo__link *lk, nemo__slot *hs, uint32_t seq, uint32_t end)
{
	uint32_t ack = atomic_load_explicit(&lk->ack, memory_order_acquire);
	if ((int32_t)(ack - end) >= 0)
		return true;
	uint32_t exp = seq;
	return !atomic_compare_exchange_strong_explicit(&hs->seq, &exp, 0, memory_order_acq_rel,
							memory_order_acquire);
}

static int ring_put(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, uint32_t meta,
		    uint64_t arg, const void *payload, size_t len, unsigned flags)
{
	struct nemo_domain *d = me->d;
	unsigned r = nemo_place_index(dest);
	nemo__out *o = &me->out_row[r];
	nemo__link *lk = nemo__link_of(d, r, me->idx);
	if (__builtin_expect(o->ring_gen != me->gen, 0)) {                  /* G1, G2 */
		int err = claim(me, dst, st, r, flags, o, lk, true);
		if (err)
			return err;
	}
	uint32_t need = slots_for(nemo__meta_len(meta));
	if (o->tail + need - o->ack_seen > d->R) {
		struct ring_room rr = { o, lk, need, d->R };
		if (!ring_has_room(&rr)) {
			int err = wait_room(me, dst, st, r, flags, ring_has_room, &rr);
			if (err)
				return err;
		}
	}
	/* S1: payload slots, then the head; its seq last, with release. */
	nemo__slot *ring = nemo__ring_of(d, r, me->idx);
	uint32_t mask = d->R - 1, p = o->tail;
	const unsigned char *src = payload;
	for (uint32_t k = 1; k < need; k++) {
		nemo__slot *ps = &ring[(p + k) & mask];
		size_t off = (size_t)(k - 1) * 12, n = len - off < 12 ? len - off : 12;
		atomic_store_explicit(&ps->seq, 0, memory_order_relaxed);
		memcpy((unsigned char *)ps + 4, src + off, n);
	}
	nemo__slot *hs = &ring[p & mask];
	/* Deferred sends (a stream) ask for the line they will write a few
	 * messages from now: the consumer read it a lap ago, so taking it
	 * back costs a round trip, which this overlaps with the messages in
	 * between.  A lone send does not: its one store is the whole point. */
	if (flags & NEMO_MORE)
		__builtin_prefetch(&ring[(p + NEMO__PREFETCH_SLOTS) & mask], 1);
	hs->meta = meta;
	hs->arg = arg;
	uint32_t seq = nemo__slot_seq(p, d->Rbits, nemo__rtag(nemo__id_gen(dest)));
	atomic_store_explicit(&hs->seq, seq, memory_order_release);
	o->tail = p + need;
	if (!nemo__asym)
		NEMO__FENCE();                   /* S2 */
	if (atomic_load_explicit(&dst->status, memory_order_seq_cst) != st) { /* S3 */
		if (!ring_delivered(lk, hs, seq, p + need)) {
			o->tail = p;
			NEMO__PCOUNT(me, c_send_failures);
			return nemo__fail(ESRCH, "send", "place %#llx left during the send: not delivered",
					  (unsigned long long)dest);
		}
		NEMO__PCOUNT(me, c_am_sent);   /* read before, or taken by, the leave */
		return 0;
	}
	NEMO__PCOUNT(me, c_am_sent);
	if (flags & NEMO_MORE)
		o->deferred = 1;
	else
		nemo__publish(me, r, flags & NEMO_PUSH);                     /* S4, S5 */
	return 0;
}

/* A batch of one-slot messages: S1 for each (room permitting), then one
 * S3 and one publication for the lot.  If S3 finds the receiver leaving,
 * the entries are settled in order: those its ack covers, or whose CAS
 * fails (its final drain took them), were delivered; from the first CAS
 * that succeeds on, none is (the final drain stops at the first entry it
 * cannot take, so the rest are ours to take back). */
static uint32_t batch_settle(nemo_place *me, nemo__slot *ring, uint32_t mask, nemo__link *lk,
			     uint32_t first, uint32_t end, uint32_t rtag, size_t *delivered)
{
	unsigned rb = me->d->Rbits;
	uint32_t p = first;
	while (p != end && ring_delivered(lk, &ring[p & mask], nemo__slot_seq(p, rb, rtag), p + 1))
		p++;
	*delivered = p - first;
	/* The rest: ours to take back (their CASes cannot fail now). */
	for (uint32_t q = p; q != end; q++)
		ring_delivered(lk, &ring[q & mask], nemo__slot_seq(q, rb, rtag), q + 1);
	return p;           /* the new tail */
}

static int batch_put(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, uint32_t meta,
		     const uint64_t *args, size_t n, unsigned flags, size_t *sent)
{
	struct nemo_domain *d = me->d;
	unsigned r = nemo_place_index(dest);
	nemo__out *o = &me->out_row[r];
	nemo__link *lk = nemo__link_of(d, r, me->idx);
	nemo__slot *ring = nemo__ring_of(d, r, me->idx);
	uint32_t mask = d->R - 1, rtag = nemo__rtag(nemo__id_gen(dest));
	unsigned rb = d->Rbits;
	size_t done = 0;
	int err = 0;
	if (__builtin_expect(o->ring_gen != me->gen, 0)) {                  /* G1, G2 */
		err = claim(me, dst, st, r, flags, o, lk, true);
		if (err) {
			*sent = 0;
			return err;
		}
	}
	while (done < n) {
		/* As many as fit now (at least one, after waiting if needed). */
		uint32_t room = d->R - (o->tail - o->ack_seen);
		if (!room) {
			o->ack_seen = atomic_load_explicit(&lk->ack, memory_order_acquire);
			room = d->R - (o->tail - o->ack_seen);
		}
		if (!room) {
			struct ring_room rr = { o, lk, 1, d->R };
			err = wait_room(me, dst, st, r, flags, ring_has_room, &rr);
			if (err)
				break;
			continue;
		}
		size_t chunk = n - done < room ? n - done : room;
		uint32_t first = o->tail, p = first;
		for (size_t i = 0; i < chunk; i++, p++) {                    /* S1 */
			nemo__slot *hs = &ring[p & mask];
			if (!(p % (NEMO__CACHELINE / sizeof *hs)))   /* once per line */
				__builtin_prefetch(&ring[(p + NEMO__PREFETCH_SLOTS) & mask], 1);
			hs->meta = meta;
			hs->arg = args[done + i];
			atomic_store_explicit(&hs->seq, nemo__slot_seq(p, rb, rtag), memory_order_release);
		}
		o->tail = p;
		if (!nemo__asym)
			NEMO__FENCE();                                       /* S2 */
		if (atomic_load_explicit(&dst->status, memory_order_seq_cst) != st) { /* S3 */
			size_t k;
			o->tail = batch_settle(me, ring, mask, lk, first, p, rtag, &k);
			done += k;
			NEMO__PADD(me, c_am_sent, k);
			if (k < chunk)
				NEMO__PCOUNT(me, c_send_failures);
			err = k < chunk ? ESRCH : 0;
			if (err)
				break;
			continue;
		}
		NEMO__PADD(me, c_am_sent, chunk);
		done += chunk;
		o->deferred = 1;
	}
	if (o->deferred && !(flags & NEMO_MORE))
		nemo__publish(me, r, flags & NEMO_PUSH);                     /* S4, S5 */
	*sent = done;
	return err;
}

/* ------------------------------------------------------- notify send */

struct nf_room {
	nemo__out *o;
	nemo__link *lk;
	_Atomic uint64_t *e;
};

static bool nf_has_room(void *p)
{
	struct nf_room *nr = p;
	_Atomic uint64_t *e = &nr->lk->nf[nr->o->nf_tail % NEMO_NOTIFY_FIFO_LEN];
	return atomic_load_explicit(e, memory_order_acquire) == 0;
}

static int notify_send(nemo_place *me, nemo_place_id dest, uint32_t chan, unsigned flags)
{
	struct nemo_domain *d = me->d;
	uint64_t st;
	nemo_place *dst = nemo__dest(d, dest, &st);                          /* S0 */
	if (!dst)
		return nemo__fail(ESRCH, "nemo_notify", "place %#llx is not in the domain (never was, or left)",
				  (unsigned long long)dest);
	if (!atomic_load_explicit(&dst->nf_fn, memory_order_acquire)) {
		/* Absent, or cleared by a new occupant's join: which? */
		if (atomic_load_explicit(&dst->status, memory_order_acquire) != st)
			return nemo__fail(ESRCH, "nemo_notify", "place %#llx left", (unsigned long long)dest);
		return nemo__fail(ENOENT, "nemo_notify", "place %#llx has no notification handler "
				  "(nemo_notify_set_handler there)", (unsigned long long)dest);
	}
	unsigned r = nemo_place_index(dest);
	nemo__out *o = &me->out_row[r];
	nemo__link *lk = nemo__link_of(d, r, me->idx);
	if (__builtin_expect(o->nf_gen != me->gen, 0)) {                    /* G1, G2 */
		int err = claim(me, dst, st, r, flags, o, lk, false);
		if (err)
			return err;
	}
	struct nf_room nr = { o, lk, NULL };
	if (!nf_has_room(&nr)) {
		int err = wait_room(me, dst, st, r, flags, nf_has_room, &nr);
		if (err)
			return err;
	}
	/* The tail only now: handlers run while waiting may have notified
	 * this very receiver and taken the slot we looked at first. */
	uint32_t p = o->nf_tail;
	nr.e = &lk->nf[p % NEMO_NOTIFY_FIFO_LEN];
	uint64_t v = nemo__nf_entry(chan, nemo__rtag(nemo__id_gen(dest)));
	atomic_store_explicit(nr.e, v, memory_order_release);                /* S1 */
	o->nf_tail = p + 1;
	if (!nemo__asym)
		NEMO__FENCE();                   /* S2 */
	if (atomic_load_explicit(&dst->status, memory_order_seq_cst) != st) { /* S3 */
		uint64_t exp = v;
		if (atomic_compare_exchange_strong_explicit(nr.e, &exp, 0, memory_order_acq_rel,
							    memory_order_acquire)) {
			o->nf_tail = p;
			NEMO__PCOUNT(me, c_send_failures);
			return nemo__fail(ESRCH, "nemo_notify", "place %#llx left during the send: not delivered",
					  (unsigned long long)dest);
		}
		NEMO__PCOUNT(me, c_nf_sent);
		return 0;
	}
	NEMO__PCOUNT(me, c_nf_sent);
	if (flags & NEMO_MORE)
		o->deferred = 1;
	else
		nemo__publish(me, r, flags & NEMO_PUSH);                     /* S4, S5 */
	return 0;
}

/* ------------------------------------------------------------ overflow */

/* Room for one more entry: squeeze out delivered ones when at least half
 * are delivered, else double the array (mmap/mremap: system calls, safe
 * in the interrupt-mode signal handler, where malloc is not). */
static int ovf_room(nemo_place *me)
{
	if (me->ovf_tail < me->ovf_cap)
		return 0;
	if (me->ovf_cap && me->ovf_n <= me->ovf_cap / 2) {
		uint32_t k = 0;
		for (uint32_t i = me->ovf_head; i < me->ovf_tail; i++)
			if (me->ovf[i].kind != NEMO__OVF_DONE)
				me->ovf[k++] = me->ovf[i];
		me->ovf_head = 0;
		me->ovf_tail = k;
		return 0;
	}
	uint32_t cap = me->ovf_cap ? me->ovf_cap * 2 : 64;
	size_t old = (size_t)me->ovf_cap * sizeof *me->ovf, sz = (size_t)cap * sizeof *me->ovf;
	/* mmap, copy, munmap rather than mremap: ThreadSanitizer does not
	 * follow mremap, and a grown array is rare. */
	void *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return ENOMEM;
	if (me->ovf) {
		memcpy(p, me->ovf, old);
		munmap(me->ovf, old);
	}
	me->ovf = p;
	me->ovf_cap = cap;
	return 0;
}

void nemo__ovf_free(nemo_place *me)
{
	if (me->ovf)
		munmap(me->ovf, (size_t)me->ovf_cap * sizeof *me->ovf);
	me->ovf = NULL;
	me->ovf_cap = me->ovf_head = me->ovf_tail = me->ovf_n = 0;
}

/* Keep a send that found its queue full inside a handler (OVERFLOW). */
static int ovf_push(nemo_place *me, unsigned kind, nemo_place_id dest, uint32_t meta, uint64_t arg,
		    const void *payload, size_t len, unsigned flags)
{
	unsigned r = nemo_place_index(dest);
	nemo__out *o = &me->out_row[r];
	if (me->ovf_n >= me->d->ovf_max)
		return nemo__fail(ENOBUFS, "send", "the queue to place %#llx is full and this place's overflow "
				  "already holds %u sends (nemo_domain_attr.overflow_max): not queued",
				  (unsigned long long)dest, me->ovf_n);
	if (ovf_room(me))
		return nemo__fail(ENOMEM, "send", "the queue to place %#llx is full and the overflow cannot grow: "
				  "not queued", (unsigned long long)dest);
	nemo__ovf_entry *e = &me->ovf[me->ovf_tail++];
	e->dest = dest;
	e->arg = arg;
	e->meta = meta;
	e->kind = (uint8_t)kind;
	e->len = (uint8_t)len;
	if (len)
		memcpy(e->payload, payload, len);
	me->ovf_n++;
	if (!o->ovf_ring && !o->ovf_nf)   /* tell r: its sends to us wait now */
		atomic_store_explicit(&nemo__link_of(me->d, r, me->idx)->held, 1, memory_order_relaxed);
	if (kind == NEMO__OVF_RING)
		o->ovf_ring++;
	else
		o->ovf_nf++;
	NEMO__PCOUNT(me, c_overflowed);
	/* What is already in the ring must be heard of, to make room. */
	if (o->deferred && !(flags & NEMO_MORE))
		nemo__publish(me, r, false);
	return 0;
}

static void ovf_done(nemo_place *me, nemo__ovf_entry *e)
{
	unsigned r = nemo_place_index(e->dest);
	nemo__out *o = &me->out_row[r];
	if (e->kind == NEMO__OVF_RING)
		o->ovf_ring--;
	else
		o->ovf_nf--;
	if (!o->ovf_ring && !o->ovf_nf)
		atomic_store_explicit(&nemo__link_of(me->d, r, me->idx)->held, 0, memory_order_relaxed);
	e->kind = NEMO__OVF_DONE;
	me->ovf_n--;
}

uint32_t nemo__ovf_flush(nemo_place *me)
{
	if (!me->ovf_n)
		return 0;
	struct nemo_domain *d = me->d;
	/* Receivers whose queue is still full in this pass: their later
	 * entries wait too (order).  And those we sent to (to publish). */
	uint64_t stuck_ring[NEMO_PLACES_MAX / 64] = { 0 }, stuck_nf[NEMO_PLACES_MAX / 64] = { 0 };
	uint64_t sent[NEMO_PLACES_MAX / 64] = { 0 };
	bool any = false;
	for (uint32_t i = me->ovf_head; i < me->ovf_tail && me->ovf_n; i++) {
		nemo__ovf_entry *e = &me->ovf[i];
		if (e->kind == NEMO__OVF_DONE)
			continue;
		unsigned r = nemo_place_index(e->dest);
		uint64_t *stuck = e->kind == NEMO__OVF_RING ? stuck_ring : stuck_nf, bit = 1ull << (r % 64);
		if (stuck[r / 64] & bit)
			continue;
		int err;
		if (e->kind == NEMO__OVF_RING) {
			uint64_t st;
			nemo_place *dst = nemo__dest(d, e->dest, &st);
			err = dst ? ring_put(me, dst, st, e->dest, e->meta, e->arg, e->len ? e->payload : NULL, e->len,
					     NEMO_NONBLOCK | NEMO_MORE)
				  : ESRCH;
		} else {
			err = notify_send(me, e->dest, (uint32_t)e->arg, NEMO_NONBLOCK | NEMO_MORE);
		}
		if (err == EAGAIN) {
			stuck[r / 64] |= bit;
			continue;
		}
		if (err) {
			/* The receiver left (or, for a notification, cleared its
			 * handler) after the send was kept: it cannot be
			 * delivered, and its sender has been told 0.  Count it,
			 * and say so under NEMO_DEBUG. */
			NEMO__PCOUNT(me, c_ovf_dropped);
			nemo__fail(err, "overflow", "a kept %s to place %#llx could not be delivered: dropped "
				   "(counted in overflow_dropped)", e->kind == NEMO__OVF_RING ? "message" : "notification",
				   (unsigned long long)e->dest);
		} else {
			sent[r / 64] |= 1ull << (r % 64);
			any = true;
		}
		ovf_done(me, e);
	}
	while (me->ovf_head < me->ovf_tail && me->ovf[me->ovf_head].kind == NEMO__OVF_DONE)
		me->ovf_head++;
	if (me->ovf_head == me->ovf_tail)
		me->ovf_head = me->ovf_tail = 0;
	if (any) {
		unsigned rs[NEMO_PLACES_MAX];
		size_t n = 0;
		for (unsigned w = 0; w < NEMO_PLACES_MAX / 64; w++)
			for (uint64_t x = sent[w]; x; x &= x - 1) {
				unsigned r = w * 64 + (unsigned)__builtin_ctzll(x);
				if (me->out_row[r].deferred)
					rs[n++] = r;
			}
		nemo__publish_many(me, rs, n, false);
	}
	return me->ovf_n;
}

/* Outside a handler: deliver what the overflow holds for receiver r on
 * one queue, waiting for room as a blocking send does (NEMO_NONBLOCK:
 * EAGAIN if any is left). */
struct ovf_q {
	nemo_place *me;
	nemo__out *o;
	bool ring;
};

static bool ovf_q_empty(void *p)
{
	struct ovf_q *q = p;
	nemo__ovf_flush(q->me);
	return q->ring ? !q->o->ovf_ring : !q->o->ovf_nf;
}

static int ovf_wait_dest(nemo_place *me, nemo_place *dst, uint64_t st, unsigned r, unsigned flags, bool ring)
{
	struct ovf_q q = { me, &me->out_row[r], ring };
	if (ovf_q_empty(&q))
		return 0;
	int err = wait_room(me, dst, st, r, flags, ovf_q_empty, &q);
	if (err == ESRCH)
		nemo__ovf_flush(me);      /* drops what was kept for it, counted */
	return err;
}

/* Does r keep sends for us?  Then our sends to r wait until it has
 * delivered them (OVERFLOW, THE BACKPRESSURE). */
static inline bool held_by(nemo_place *me, unsigned r)
{
	return atomic_load_explicit(&me->link_row[r].held, memory_order_relaxed) != 0;
}

static bool not_held(void *p)
{
	struct ovf_q *q = p;
	return !held_by(q->me, (unsigned)(q->o - q->me->out_row));
}

/* Outside a handler, before a send to r: what we kept for r goes first;
 * and if r keeps sends for us, serve our queues until it has delivered
 * them.  NEMO_NONBLOCK: EAGAIN for the first, no wait for the second. */
static int send_slow_prelude(nemo_place *me, nemo_place *dst, uint64_t st, unsigned r, unsigned flags, bool ring)
{
	nemo__out *o = &me->out_row[r];
	if (ring ? o->ovf_ring : o->ovf_nf) {
		int err = ovf_wait_dest(me, dst, st, r, flags, ring);
		if (err)
			return err;
	}
	if (held_by(me, r) && !(flags & NEMO_NONBLOCK)) {
		struct ovf_q q = { me, o, ring };
		return wait_room(me, dst, st, r, flags, not_held, &q);
	}
	return 0;
}

void nemo__ovf_flush_all(nemo_place *me)
{
	for (unsigned n = 1; nemo__ovf_flush(me); n++) {
		me->serve_depth++;
		nemo__drain(me, NEMO_AM_CTX_WAIT, false);
		me->serve_depth--;
		nemo_cpu_relax();
		if (n % 64 == 0)
			sched_yield();
	}
}

int nemo__msg_send(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, uint32_t meta,
		   uint64_t arg, const void *payload, size_t len, unsigned flags)
{
	unsigned r = nemo_place_index(dest);
	nemo__out *o = &me->out_row[r];
	if (__builtin_expect(!o->ovf_ring && !me->hdepth && !held_by(me, r), 1))
		return ring_put(me, dst, st, dest, meta, arg, payload, len, flags);
	if (me->hdepth && !(flags & NEMO_NONBLOCK)) {
		/* In a handler: never wait (OVERFLOW). */
		if (!o->ovf_ring) {
			int err = ring_put(me, dst, st, dest, meta, arg, payload, len, flags | NEMO_NONBLOCK);
			if (err != EAGAIN)
				return err;
		}
		return ovf_push(me, NEMO__OVF_RING, dest, meta, arg, payload, len, flags);
	}
	int err = send_slow_prelude(me, dst, st, r, flags, true);
	return err ? err : ring_put(me, dst, st, dest, meta, arg, payload, len, flags);
}

int nemo__msg_send_batch(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, uint32_t meta,
			 const uint64_t *args, size_t n, unsigned flags, size_t *sent)
{
	unsigned r = nemo_place_index(dest);
	nemo__out *o = &me->out_row[r];
	if (__builtin_expect(!o->ovf_ring && !me->hdepth && !held_by(me, r), 1))
		return batch_put(me, dst, st, dest, meta, args, n, flags, sent);
	*sent = 0;
	if (me->hdepth && !(flags & NEMO_NONBLOCK)) {
		size_t k = 0;
		if (!o->ovf_ring) {
			int err = batch_put(me, dst, st, dest, meta, args, n, flags | NEMO_NONBLOCK, &k);
			if (err != EAGAIN) {
				*sent = k;
				return err;
			}
		}
		for (; k < n; k++) {
			int err = ovf_push(me, NEMO__OVF_RING, dest, meta, args[k], NULL, 0, flags | NEMO_MORE);
			if (err) {
				*sent = k;
				return err;
			}
		}
		if (o->deferred && !(flags & NEMO_MORE))
			nemo__publish(me, nemo_place_index(dest), flags & NEMO_PUSH);
		*sent = n;
		return 0;
	}
	int err = send_slow_prelude(me, dst, st, r, flags, true);
	return err ? err : batch_put(me, dst, st, dest, meta, args, n, flags, sent);
}

/* nemo_notify's send, with the overflow's rules (as nemo__msg_send). */
static int notify_send_kept(nemo_place *me, nemo_place_id dest, uint32_t chan, unsigned flags)
{
	unsigned r = nemo_place_index(dest);
	nemo__out *o = r < me->d->P ? &me->out_row[r] : NULL;
	if (__builtin_expect(!o || (!o->ovf_nf && !me->hdepth && !held_by(me, r)), 1))
		return notify_send(me, dest, chan, flags);
	if (me->hdepth && !(flags & NEMO_NONBLOCK)) {
		if (!o->ovf_nf) {
			int err = notify_send(me, dest, chan, flags | NEMO_NONBLOCK);
			if (err != EAGAIN)
				return err;
		}
		return ovf_push(me, NEMO__OVF_NF, dest, 0, chan, NULL, 0, flags);
	}
	uint64_t st;
	nemo_place *dst = nemo__dest(me->d, dest, &st);
	if (!dst)
		return notify_send(me, dest, chan, flags);   /* its ESRCH; and drop the kept ones */
	int err = send_slow_prelude(me, dst, st, r, flags, false);
	return err ? err : notify_send(me, dest, chan, flags);
}

int nemo_notify(nemo_place_id dest, uint32_t chan, unsigned flags)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	if (flags & ~(unsigned)(NEMO_PUSH | NEMO_NONBLOCK | NEMO_MORE))
		return NEMO__FAIL(EINVAL, "flags 0x%x: unknown bits 0x%x (NEMO_PUSH, NEMO_NONBLOCK, NEMO_MORE)",
				  flags, flags & ~(unsigned)(NEMO_PUSH | NEMO_NONBLOCK | NEMO_MORE));
	if (chan > NEMO_NOTIFY_CHAN_MAX)
		return NEMO__FAIL(ERANGE, "channel %u is above %u", chan, NEMO_NOTIFY_CHAN_MAX);
	nemo__busy_enter(me);
	int err = notify_send_kept(me, dest, chan, flags);
	nemo__busy_exit(me);
	return err;
}

int nemo_domain_notify(nemo_domain *d, nemo_place_id dest, uint32_t chan, unsigned flags)
{
	int err = nemo__place_adopt(d, __func__);
	return err ? err : nemo_notify(dest, chan, flags);
}

int nemo_notify_set_handler(nemo_notify_handler fn, void *ctx)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	/* Only this thread reads the pair, in a drain: a nemo call, so the
	 * interrupt handler cannot run one in between these two stores (it
	 * defers to busy_exit, which then runs the new handler).  Senders
	 * read fn only to refuse a place without one (ENOENT). */
	nemo__busy_enter(me);
	atomic_store_explicit(&me->nf_ctx, ctx, memory_order_relaxed);
	atomic_store_explicit(&me->nf_fn, fn, memory_order_release);
	nemo__busy_exit(me);
	return 0;
}

/* ------------------------------------------------------------ receive */

static void hot_add(nemo_place *me, unsigned s)
{
	for (unsigned i = 0; i < NEMO__HOT; i++)
		if (me->hot[i] == s)
			return;
	me->hot[me->hot_next++ % NEMO__HOT] = s;
}

static void publish_ack(nemo__link *lk, nemo__in *in)
{
	if (in->acked != in->head) {
		in->acked = in->head;
		atomic_store_explicit(&lk->ack, in->head, memory_order_release);
	}
}

/* Drain the queues from sender s: at most `budget` entries unless final.
 * Sets *more if it stopped with entries left. */
static unsigned drain_link(nemo_place *me, unsigned s, nemo_am_context ctx, bool final,
			   unsigned budget, bool *more)
{
	struct nemo_domain *d = me->d;
	nemo__in *in = &me->in_row[s];
	nemo__link *lk = &me->link_row[s];
	nemo__slot *ring = me->ring_row + (size_t)s * d->R;
	uint32_t mask = d->R - 1;
	uint32_t g = nemo__rtag(me->gen);
	unsigned rb = d->Rbits;
	unsigned n = 0;

	/* Nothing there (the common case of a poll): two loads and out. */
	if (!final &&
	    atomic_load_explicit(&ring[in->head & mask].seq, memory_order_acquire) !=
		    nemo__slot_seq(in->head, rb, g) &&
	    !nemo__nf_match(atomic_load_explicit(&lk->nf[in->nf_head % NEMO_NOTIFY_FIFO_LEN],
						 memory_order_acquire), g))
		return 0;

	/* Notifications. */
	while (final || n < budget) {
		_Atomic uint64_t *e = &lk->nf[in->nf_head % NEMO_NOTIFY_FIFO_LEN];
		uint64_t v = atomic_load_explicit(e, memory_order_acquire);          /* D3 */
		if (!nemo__nf_match(v, g))
			break;
		/* Who wrote it: read before the entry is given back (WHO SENT IT). */
		uint64_t sg = atomic_load_explicit(&lk->nf_sgen, memory_order_relaxed);  /* D4 */
		if (final) {
			uint64_t exp = v;
			if (!atomic_compare_exchange_strong_explicit(e, &exp, 0, memory_order_acq_rel,
								     memory_order_acquire))
				break;    /* the sender took it back */
		} else {
			atomic_store_explicit(e, 0, memory_order_release);           /* D5 */
		}
		in->nf_head++;
		n++;
		NEMO__PCOUNT(me, c_nf_handled);
		nemo_notify_handler fn = atomic_load_explicit(&me->nf_fn, memory_order_acquire);
		void *fctx = atomic_load_explicit(&me->nf_ctx, memory_order_relaxed);
		if (fn) {
			me->hdepth++;
			fn(fctx, nemo__make_id(s, sg), nemo__nf_chan(v));
			me->hdepth--;
		}
	}

	/* Active messages. */
	while (final || n < budget) {
		uint32_t p = in->head;
		nemo__slot *hs = &ring[p & mask];
		uint32_t v = atomic_load_explicit(&hs->seq, memory_order_acquire);  /* D3 */
		if (v != nemo__slot_seq(p, rb, g))
			break;
		uint64_t sg = atomic_load_explicit(&lk->ring_sgen, memory_order_relaxed); /* D4 */
		if (final) {
			uint32_t exp = v;
			if (!atomic_compare_exchange_strong_explicit(&hs->seq, &exp, 0, memory_order_acq_rel,
								     memory_order_acquire))
				break;    /* the sender took it back */
		}
		uint32_t meta = hs->meta;
		uint64_t arg = hs->arg;
		uint32_t len = nemo__meta_len(meta);
		uint32_t need = slots_for(len);
		unsigned char buf[NEMO__WIRE_PAYLOAD_MAX];
		for (uint32_t k = 1; k < need; k++) {
			size_t off = (size_t)(k - 1) * 12, m = len - off < 12 ? len - off : 12;
			memcpy(buf + off, (unsigned char *)&ring[(p + k) & mask] + 4, m);
		}
		in->head = p + need;
		/* Give the sender its room back before the handler runs: the
		 * handler may wait on a full queue to this very sender. */
		if (in->head - in->acked >= d->R / 4)
			publish_ack(lk, in);
		n++;
		NEMO__PCOUNT(me, c_am_handled);
		nemo__deliver_fn fn = atomic_load_explicit(&d->deliver, memory_order_acquire);
		if (fn) {
			me->hdepth++;
			fn(me, nemo__make_id(s, sg), meta, arg, len ? buf : NULL, len, ctx);
			me->hdepth--;
		}
	}
	publish_ack(lk, in);
	if (!final && n >= budget)
		*more = true;
	return n;
}

unsigned nemo__drain(nemo_place *me, nemo_am_context ctx, bool final)
{
	struct nemo_domain *d = me->d;
	unsigned total = 0;
	bool more = false;
	if (final) {
		/* L2: every queue, by CAS, until a pass finds nothing. */
		for (;;) {
			unsigned got = 0;
			for (unsigned s = 0; s < d->P; s++)
				got += drain_link(me, s, ctx, true, 0, &more);
			total += got;
			if (!got)
				return total;
		}
	}
	unsigned budget = d->R + NEMO_NOTIFY_FIFO_LEN;
	/* D1: the hot queues first: a polling receiver finds a hot sender's
	 * entry there before the sender's hint bit arrives. */
	for (unsigned i = 0; i < NEMO__HOT; i++) {
		unsigned s = me->hot[i];
		if (s < d->P)
			total += drain_link(me, s, ctx, false, budget, &more);
	}
	/* D2: the hint words. */
	_Atomic uint64_t *row = nemo__hint_row(d, me->idx);
	for (unsigned w = 0; w < d->HW; w++) {
		if (!atomic_load_explicit(&row[w], memory_order_relaxed))
			continue;
		uint64_t x = atomic_exchange_explicit(&row[w], 0, memory_order_seq_cst);
		while (x) {
			unsigned b = (unsigned)__builtin_ctzll(x);
			x &= x - 1;
			unsigned s = w * 64 + b;
			bool left = false;
			unsigned got = drain_link(me, s, ctx, false, budget, &left);
			if (got)
				hot_add(me, s);
			if (left) {
				/* Stopped at the budget: keep s findable. */
				atomic_fetch_or_explicit(&row[w], 1ull << b, memory_order_relaxed);
			}
			total += got;
		}
	}
	if (more) {
		/* A hot queue hit the budget: find it again next time. */
		for (unsigned i = 0; i < NEMO__HOT; i++) {
			unsigned s = me->hot[i];
			if (s < d->P)
				atomic_fetch_or_explicit(&row[s / 64], 1ull << (s % 64), memory_order_relaxed);
		}
	}
	return total;
}

bool nemo__pending(nemo_place *me)
{
	struct nemo_domain *d = me->d;
	uint32_t g = nemo__rtag(me->gen);
	/* Hot queues first: a stream's next entry is found with the one line
	 * transfer that brings it, before the sender's hint RMW (a second
	 * line, which it is writing at that moment) is even looked at. */
	for (unsigned i = 0; i < NEMO__HOT; i++) {
		unsigned s = me->hot[i];
		if (s >= d->P)
			continue;
		nemo__in *in = &me->in_row[s];
		nemo__slot *hs = &me->ring_row[(size_t)s * d->R + (in->head & (d->R - 1))];
		if (atomic_load_explicit(&hs->seq, memory_order_acquire) == nemo__slot_seq(in->head, d->Rbits, g))
			return true;
		uint64_t v = atomic_load_explicit(&me->link_row[s].nf[in->nf_head % NEMO_NOTIFY_FIFO_LEN],
						  memory_order_acquire);
		if (nemo__nf_match(v, g))
			return true;
	}
	_Atomic uint64_t *row = nemo__hint_row(d, me->idx);
	for (unsigned w = 0; w < d->HW; w++)
		if (atomic_load_explicit(&row[w], memory_order_seq_cst))
			return true;
	return false;
}

/* --------------------------------------------------------- poll, wait */

int nemo_poll(unsigned *handled)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	nemo__busy_enter(me);
	bool fd = atomic_load_explicit(&me->efd, memory_order_relaxed) >= 0;
	if (fd)
		nemo__fd_disarm(me);
	unsigned n = nemo__drain(me, NEMO_AM_CTX_POLL, false);
	if (me->ovf_n)
		nemo__ovf_flush(me);
	if (fd)
		nemo__fd_arm(me);
	nemo__busy_exit(me);
	if (handled)
		*handled = n;
	return 0;
}

/* ------------------------------------------------- the file descriptor */

void nemo__fd_disarm(nemo_place *me)
{
	atomic_exchange_explicit(&me->fd_armed, 0, memory_order_seq_cst);                 /* F4 */
	/* F5: read back the writes we know of (a kicker counts its write
	 * after making it, so each counted one is in the eventfd). */
	uint32_t w = atomic_load_explicit(&me->fd_writes, memory_order_acquire);
	if ((int32_t)(w - me->fd_read) > 0) {
		uint64_t v;
		if (read(atomic_load_explicit(&me->efd, memory_order_relaxed), &v, sizeof v) == (ssize_t)sizeof v)
			me->fd_read += (uint32_t)v;
	}
}

/* Write the eventfd ourselves: something is waiting already. */
static void fd_self_write(nemo_place *me)
{
	uint64_t one = 1;
	if (write(atomic_load_explicit(&me->efd, memory_order_relaxed), &one, sizeof one) == (ssize_t)sizeof one)
		atomic_fetch_add_explicit(&me->fd_writes, 1, memory_order_release);
}

void nemo__fd_arm(nemo_place *me)
{
	atomic_store_explicit(&me->fd_armed, 1, memory_order_seq_cst);                    /* F1 */
	if (me->ovf_n || nemo__pending(me)) {                                               /* F2 */
		/* Undo, and make the descriptor readable: the loop comes back. */
		if (atomic_exchange_explicit(&me->fd_armed, 0, memory_order_seq_cst))
			fd_self_write(me);
	}
}

int nemo_place_fd(int *fd)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	if (!fd)
		return NEMO__FAIL(EINVAL, "fd is NULL");
	int e = atomic_load_explicit(&me->efd, memory_order_relaxed);
	if (e < 0) {
		e = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (e < 0)
			return NEMO__FAIL(errno, "cannot create the place's eventfd");
		me->fd_read = atomic_load_explicit(&me->fd_writes, memory_order_relaxed);
		atomic_store_explicit(&me->efd, e, memory_order_release);
	}
	nemo__busy_enter(me);
	nemo__fd_arm(me);
	nemo__busy_exit(me);
	*fd = e;
	return 0;
}

void nemo__fd_close(nemo_place *me)
{
	int e = atomic_load_explicit(&me->efd, memory_order_relaxed);
	if (e < 0)
		return;
	atomic_exchange_explicit(&me->fd_armed, 0, memory_order_seq_cst);                 /* F6 */
	for (unsigned n = 1; atomic_load_explicit(&me->fd_kickers, memory_order_seq_cst); n++) {
		nemo_cpu_relax();
		if (n % 64 == 0)
			sched_yield();      /* a kicker preempted inside its bracket */
	}
	atomic_store_explicit(&me->efd, -1, memory_order_relaxed);
	close(e);
}

static bool place_try_take(void *arg)
{
	nemo_place *me = arg;
	/* The drain itself, not "pending, then drain": its empty checks
	 * cost as much as nemo__pending's, and a message found is handled
	 * without a second look. */
	unsigned n = nemo__drain(me, NEMO_AM_CTX_WAIT, false);
	if (me->ovf_n)
		nemo__ovf_flush(me);
	me->handled += n;
	return n > 0;
}

static bool place_sleep_begin(void *arg, uint32_t **word, uint32_t *val, uint32_t *bits)
{
	nemo_place *me = arg;
	nemo_waiter *w = atomic_load_explicit(&me->waiter, memory_order_relaxed);
	_Atomic uint32_t *bseq = &me->d->bseq;
	/* Sleep on the domain's word with our bit (waiter.c, SHARED WORD):
	 * set each time, since a handler may have waited on a nemo_cond in
	 * between and left bword NULL. */
	atomic_store_explicit(&w->bword, bseq, memory_order_relaxed);
	uint32_t seen = atomic_load_explicit(bseq, memory_order_seq_cst);                 /* B1 */
	atomic_exchange_explicit(&w->state, NEMO_WAITER_SLEEPING, memory_order_seq_cst);  /* W2 */
	if (me->ovf_n || nemo__pending(me)) {                                              /* W3 */
		/* Undo; futex_wait then returns at once (state != SLEEPING)
		 * and the loop's try_take drains.  A place with kept sends
		 * does not sleep (nobody would wake it when room appears): it
		 * yields, and tries again (OVERFLOW). */
		atomic_store_explicit(&w->state, NEMO_WAITER_RUNNING, memory_order_relaxed);
		if (me->ovf_n)
			sched_yield();
		*word = (uint32_t *)&w->state;
		*val = NEMO_WAITER_SLEEPING;
		return false;
	}
	NEMO__PCOUNT(me, c_sleeps);
	*word = (uint32_t *)bseq;                                                          /* B2 */
	*val = seen;
	*bits = w->bbit;
	return false;                                                                      /* W4 */
}

static void place_sleep_end(void *arg)
{
	nemo_place *me = arg;
	nemo_waiter *w = atomic_load_explicit(&me->waiter, memory_order_relaxed);
	atomic_store_explicit(&w->state, NEMO_WAITER_RUNNING, memory_order_relaxed);      /* W5 */
}

static const nemo__wait_ops place_ops = {
	.try_take = place_try_take,
	.sleep_begin = place_sleep_begin,
	.sleep_end = place_sleep_end,
	.futex_flags = NEMO_FUTEX_PRIVATE,
};

int nemo_place_wait(const struct timespec *abstime, unsigned *handled)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	int rc = nemo__check_deadline(__func__, CLOCK_MONOTONIC, abstime);
	if (rc)
		return rc;
	nemo__busy_enter(me);
	if (atomic_load_explicit(&me->efd, memory_order_relaxed) >= 0)
		nemo__fd_disarm(me);        /* it waits here now, not on its descriptor */
	unsigned outer = me->handled;   /* a handler may wait too: nest the count */
	me->handled = 0;
	nemo_waiter *w = atomic_load_explicit(&me->waiter, memory_order_relaxed);
	atomic_store_explicit(&w->state, NEMO_WAITER_POLLING, memory_order_relaxed);      /* W1 */
	rc = nemo__wait_loop(&place_ops, me, &me->policy, CLOCK_MONOTONIC, abstime, 0);
	atomic_store_explicit(&w->bword, NULL, memory_order_relaxed);
	atomic_store_explicit(&w->state, NEMO_WAITER_RUNNING, memory_order_seq_cst);      /* W6 */
	if (atomic_load_explicit(&me->irq_on, memory_order_relaxed) && nemo__pending(me))
		me->handled += nemo__drain(me, NEMO_AM_CTX_WAIT, false);
	if (atomic_load_explicit(&me->efd, memory_order_relaxed) >= 0)
		nemo__fd_arm(me);           /* back to waiting on its descriptor */
	unsigned n = me->handled;
	me->handled = outer + n;
	nemo__busy_exit(me);
	if (rc == ETIMEDOUT && n)
		rc = 0;
	if (handled)
		*handled = n;
	return rc;
}
