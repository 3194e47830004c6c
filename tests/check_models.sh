#!/usr/bin/env bash
# check_models.sh MODELS_DIR - model-check the sleep/wake handshakes with
# spin: each model must verify with 0 errors (exhaustive search, with up
# to 1 or 2 spurious wake-ups allowed), and its deliberately broken
# variants must FAIL, so the check cannot pass vacuously.
set -u
dir=$1
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {   # run MODEL FLAGS... ; prints pan's error count
	local model=$1; shift
	rm -f "$tmp"/*
	cp "$dir/$model" "$tmp/" || return 1
	# -O0: compiling pan.c costs more than running it (place.pml: gcc -O2
	# 3 s + pan 1.5 s, gcc -O0 0.5 s + pan 2 s, CPU time).  -DSAFETY: only
	# safety properties are checked (assertions, end states; no -a), so
	# pan need not carry what cycle detection needs.
	(cd "$tmp" && spin -a "$@" "$model" >/dev/null && gcc -O0 -w -DSAFETY -o pan pan.c &&
		./pan -m200000 2>&1) | sed -n 's/.*errors: \([0-9]*\).*/\1/p' | head -1
}

must_pass() {   # MODEL FLAGS...
	local e
	e=$(run "$@")
	if [ "$e" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $*: errors=${e:-none}"; fi
}

must_fail() {   # MODEL FLAGS...: a deliberately broken variant
	local e
	e=$(run "$@")
	if [ -n "$e" ] && [ "$e" -gt 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $* was not caught (errors=${e:-none})"; fi
}

for model in slot.pml event.pml; do
	must_pass "$model" -DMAXSPUR=1
	must_pass "$model" -DMAXSPUR=2
	must_fail "$model" -DBROKEN
done
# The slot queued on a condvar's shared word (waiter.c, SHARED WORD).
must_pass slot.pml -DSHARED -DMAXSPUR=1
must_pass slot.pml -DSHARED -DMAXSPUR=2
must_fail slot.pml -DSHARED -DK1EARLY        # kick reads the word before its CAS
must_fail slot.pml -DSHARED -DBROKEN
# The condvar's lifetime (cond.c, LIFETIME): destroy right after a tree or
# flat broadcast, with timed waiters racing it, never lets a waiter touch
# the freed condvar; without the references (the old code), or dropping
# one before kicking the child, it does.
must_pass cond.pml
must_pass cond.pml -DTIMED
must_pass cond.pml -DFLAT -DTIMED
must_fail cond.pml -DTIMED -DBROKEN_NOREF
must_fail cond.pml -DFLAT -DBROKEN_NOREF
must_fail cond.pml -DTIMED -DBROKEN_EARLY_PUT
# The per-thread record (cond.c, THE RECORD): touched only before R1.
must_fail cond.pml -DTIMED -DBROKEN_LATE_REC
must_fail cond.pml -DFLAT -DBROKEN_LATE_REC
# The flat broadcast (cond.c, BROADCAST; waiter.c, nemo__waiter_kick_many):
# no waiter left asleep; no FUTEX_WAKE when every waiter polls.
must_pass broadcast.pml -DMAXSPUR=1
must_pass broadcast.pml -DMAXSPUR=2
must_pass broadcast.pml -DPOLL
must_pass broadcast.pml -DPOLL -DPOLL1
must_fail broadcast.pml -DBROKEN_ONE_BIT
must_fail broadcast.pml -DBROKEN_NO_FENCE
must_fail broadcast.pml -DPOLL -DPOLL1 -DBROKEN_ALWAYS_WAKE
# The messaging layer (src/messaging/send.c, drain.c, kick.c): no lost wake-up of a
# place sleeping on the domain's shared word (default), a send racing
# nemo_place_leave is delivered xor failed with the asymmetric barrier
# (-DLEAVE: entry stores may sit in the sender's store buffer past S3),
# and handlers name the true sender across a change of hands of the
# sender's index (-DGEN).  The queue is the notification FIFO unless
# -DRING.  MAXSPUR=2 allows every run MAXSPUR=1 does, and more, so each
# configuration runs once, with the larger bound where the time allows
# (pan's CPU time on the 2-vCPU VM: default 3 s, -DLEAVE 5 s (10 s with
# MAXSPUR=2), -DLEAVE -DRING 7 s, -DLEAVE -DFENCED 4 s, the rest well
# under 1 s each; the whole script about 30 s).
must_pass place.pml -DMAXSPUR=2
must_pass place.pml -DHOT0=0 -DMAXSPUR=2           # no hot queue: the hint alone
must_pass place.pml -DLEAVE -DMAXSPUR=1
must_pass place.pml -DLEAVE -DFENCED -DMAXSPUR=1   # no membarrier: senders fence at S2
# The ring (read-only consumption, with the ack check at S3), and without
# the check: a retract after a normal drain had handled the message.
must_pass place.pml -DLEAVE -DRING -DMAXSPUR=1
must_fail place.pml -DLEAVE -DRING -DBROKEN_NO_ACK  # handled and ESRCH
must_fail place.pml -DBROKEN_KICK_FIRST             # kick reads state before the hint
must_fail place.pml -DBROKEN_CHECK_FIRST            # W3 before W2
must_fail place.pml -DBROKEN_B1_LATE                # bseq read after W3: sleeps past the bump
must_fail place.pml -DLEAVE -DBROKEN_NO_RECHECK     # no S3: a message lost
must_fail place.pml -DLEAVE -DBROKEN_PLAIN_FINAL    # LV2 without CAS: handled and ESRCH
must_fail place.pml -DLEAVE -DBROKEN_NO_BARRIER     # no fence, no membarrier: a message lost
# Who sent it: the sender-generation word and the first-send wait (WS1).
must_pass place.pml -DGEN -DMAXSPUR=2
must_pass place.pml -DGEN -DRING -DMAXSPUR=2
must_fail place.pml -DGEN -DBROKEN_NO_GEN_WAIT      # no WS1: the old message names the new sender
must_fail place.pml -DGEN -DRING -DBROKEN_LATE_D4   # word read after the ack: the same
# Stream grants (grant.c, THE STREAM GRANT): a granted sender skips the
# fence, the hint and the kick; the receiver's revocation before it sleeps
# pays with a membarrier.  Entry stores buffered (x86-TSO) in every run.
must_pass place.pml -DGRANT -DMAXSPUR=1
must_pass place.pml -DGRANT -DLEAVE -DMAXSPUR=1
must_fail place.pml -DGRANT -DBROKEN_REVOKE_NO_BARRIER # revoked without membarrier: sleeps on a message
# A place waiting in an event loop on its eventfd (placewait.c, THE FILE
# DESCRIPTOR): no message is left queued while the loop blocks, and the
# descriptor is not left readable once everything has been polled.
must_pass placefd.pml
must_fail placefd.pml -DBROKEN_NO_RECHECK     # arm without re-checking the hints
must_fail placefd.pml -DBROKEN_SKIP_READ      # read back only when the flag was taken
must_fail placefd.pml -DBROKEN_COUNTED_ONLY   # read back only counted writes (the loop spins)
must_pass placefd.pml -DEDGE                  # an edge-triggered loop
must_fail placefd.pml -DBROKEN_F0_UNREADABLE  # keep the grants, leave the descriptor unreadable
must_fail placefd.pml -DEDGE -DBROKEN_F0_IF_UNREAD  # no write when one is unread: EPOLLET never wakes
must_fail placefd.pml -DBROKEN_GRANT_ARMED     # grant while the descriptor is armed
must_fail placefd.pml -DBROKEN_NO_REVOKE       # arm without taking the grants back
must_fail placefd.pml -DBROKEN_NO_F7           # grants' hint bits left to the re-check: a quiet poll leaves it readable
# A shared-domain place (src/xproc/xproc.c, THE SLEEP, PEER DEATH): two
# senders in other processes, a shared futex, no lost wake-up without the
# 100 ms slices; a peer's death (XD2 before XD3) always reaches a sleeper.
must_pass xproc.pml -DMAXSPUR=2
must_pass xproc.pml -DDEATH -DMAXSPUR=2
must_fail xproc.pml -DBROKEN_KICK_FIRST                 # XS2 before XS1
must_fail xproc.pml -DBROKEN_CHECK_FIRST                # XW3 before XW2
must_fail xproc.pml -DDEATH -DBROKEN_DEATH_KICK_FIRST   # XD3 before XD2
# The overflow and the wait for room (src/messaging/overflow.c,
# THE WAIT FOR ROOM): a worker that keeps replies for a client is kicked
# when the client frees room - sleeping, or computing in interrupt mode -
# and a leave delivers what its final drain kept.
must_pass overflow.pml
must_pass overflow.pml -DFENCED
must_pass overflow.pml -DIRQ
must_pass overflow.pml -DLEAVE
must_pass overflow.pml -DCAP=2 -DNREQ=5
must_fail overflow.pml -DBROKEN_NO_ASK                 # sleep without asking for room
must_fail overflow.pml -DBROKEN_NO_BARRIER             # no membarrier at RW2
must_fail overflow.pml -DIRQ -DBROKEN_NO_BARRIER
must_fail overflow.pml -DBROKEN_NO_REASK               # a taken request not made again
must_fail overflow.pml -DLEAVE -DBROKEN_FREE_EARLY     # overflow freed before the final drain
# A send waiting for room woken by a request, not by the room (overflow.c,
# RW5; placewait.c, W6): a place that handles messages on its own
# (interrupt mode, progress thread, descriptor) handles the request after
# the send returns, though no later kick can come.
must_pass roomwake.pml
must_fail roomwake.pml -DBROKEN_NO_RW5                  # leave the wait without looking
# A send waiting for room (xproc.c, THE WAIT FOR ROOM): the sender sleeps
# on its own word with its bit in the receiver's room mask; the receiver
# frees a slot, then reads the mask and kicks.  Never asleep with room.
must_pass xproc.pml -DROOM -DSENDS=3 -DMAXSPUR=2
must_fail xproc.pml -DROOM -DBROKEN_ROOM_CHECK_FIRST    # XC2 before XC1
must_fail xproc.pml -DROOM -DBROKEN_ROOM_WANT_LATE      # XR1 after XW3
# Kept sends of a shared place (src/xproc/kept.c, XK4 and THE
# BACKPRESSURE): a place that keeps a send may sleep and is kicked when
# its receiver frees room; a sender waiting for a holder's release is
# kicked by it.
must_pass xprockept.pml -DMAXSPUR=2
must_fail xprockept.pml -DBROKEN_NO_ASK                 # no bit in the receiver's room mask
must_fail xprockept.pml -DBROKEN_NO_LOOK                # XW3 ignores the kept entry's slot
must_pass xprockept.pml -DHELD -DMAXSPUR=2
must_fail xprockept.pml -DHELD -DBROKEN_HELD_NO_KICK    # the release kicks nobody
must_fail xprockept.pml -DHELD -DBROKEN_HELD_KICK_FIRST # XR4 before XR3
# A shared place's descriptor (src/xproc/fd.c): the bridge thread writes
# the eventfd when a sender kicks the armed place; one write per arming;
# the owner and the bridge never share the futex word's wake-ups.
must_pass xprocfd.pml -DMAXSPUR=1
must_pass xprocfd.pml -DMAXSPUR=2
must_fail xprocfd.pml -DBROKEN_NO_CHECK                 # arm without XA2
must_fail xprocfd.pml -DBROKEN_KICK_SLEEPING_ONLY       # a kick ignores FD_ARMED
must_fail xprocfd.pml -DBROKEN_NO_TOKEN                 # the bridge writes without the token
must_fail xprocfd.pml -DBROKEN_UNDO_NO_WAKE             # XA2's undo leaves the bridge queued
must_fail xprocfd.pml -DBROKEN_DISARM_NO_WAKE           # the bridge left queued on the word
# Multicast completion counting (src/mcast/mcast.c, WHY EXACTLY ONCE, AND
# WHY IT COMPLETES; SENDS THAT RETURNED 0): the multicast completes, and
# only when every member ran or its role was done by another place -
# whatever happens to each role message (queued, kept, kept and dropped
# because its place left, refused, or out of memory).
must_pass mcast.pml
must_pass mcast.pml -DDIAMOND
must_pass mcast.pml -DOOM
must_pass mcast.pml -DDIAMOND -DOOM
must_fail mcast.pml -DBROKEN_DROP_SILENT                # a dropped kept role message not reported
must_fail mcast.pml -DDIAMOND -DBROKEN_DROP_SILENT
must_fail mcast.pml -DBROKEN_COUNT_SENDS                # sends counted, not runs
must_fail mcast.pml -DDIAMOND -DBROKEN_COUNT_SENDS
# The polling watchdog (src/poll/watchdog.c, THE WATCHDOG; kick.c,
# wd_defer; drain.c, WD3): a message to a place computing in interrupt
# mode under a watchdog defers its signal to the watchdog's clock and is
# never left with no clock, no signal coming and the watchdog asleep -
# also across nemo_watchdog_stop (-DSTOP: WD6 and the stop's take).
must_pass watchdog.pml
must_pass watchdog.pml -DPOLLS=0                        # only the watchdog's signals drain
must_pass watchdog.pml -DNS=1 -DNM=2 -DPOLLS=2          # a second message finds its bit set
must_pass watchdog.pml -DSTOP
must_pass watchdog.pml -DSTOP -DNS=1 -DNM=2
must_fail watchdog.pml -DBROKEN_NO_WD2                   # the clock's starter does not wake the watchdog
must_fail watchdog.pml -DBROKEN_CLEAR_LATE              # WD3's clear after the hint words
must_fail watchdog.pml -DBROKEN_NO_WD5_RECHECK           # WD5 sleeps without re-reading the clocks
must_fail watchdog.pml -DSTOP -DBROKEN_NO_WD6            # no re-read of wd_w after the CAS
must_fail watchdog.pml -DSTOP -DBROKEN_NO_TAKE          # the stop leaves running clocks
# The code as C11 (not x86-64) reads it: the relaxed loads of drain.c's
# D2 hint word and kick.c's wd_defer reordered before the seq_cst store /
# RMW that precede them (watchdog.pml, NOTE ON THE RELAXED LOADS).
must_fail watchdog.pml -DWEAK_DRAIN                     # drain's hint load before WD3's store
must_fail watchdog.pml -DWEAK_SEND                      # sender's wd_since load before S4
# The MPI progress thread's sleep (src/mpi/mpi_internal.h, THE PROGRESS
# THREAD'S SLEEP; record.c, thr_kick and ring): no local work or message
# from a rank of this host is slept through, without the timeout.
must_pass doorbell.pml -DMAXSPUR=1
must_pass doorbell.pml -DNL=2 -DMAXSPUR=1               # two local kickers
must_pass doorbell.pml -DNR=2 -DMAXSPUR=1               # two ringing ranks
must_fail doorbell.pml -DBROKEN_LOOK_FIRST              # DBT3 before DBT1
must_fail doorbell.pml -DBROKEN_DBK3_FIRST                # the kicker reads the state before its fence
must_fail doorbell.pml -DBROKEN_NO_DBR1                   # ring without its fence
must_fail doorbell.pml -DBROKEN_NO_CAS                  # a kick wakes without claiming the word
echo "check_models: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
