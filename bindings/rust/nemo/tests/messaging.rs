//! Request/reply between thread places, timeouts, error texts.
use nemo::{Domain, ErrorKind, Flags, PlaceId};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

const REQ: u32 = 0;
const RESP: u32 = 1;

#[test]
fn request_reply_between_two_thread_places() {
    let dom = Domain::builder().max_places(4).build().unwrap();
    // The server's handler answers with arg * 2 and the payload reversed.
    dom.register(REQ, |m| {
        let mut p = m.payload().to_vec();
        p.reverse();
        m.reply(RESP, m.arg() * 2, &p).unwrap();
    })
    .unwrap();
    let got = Arc::new(std::sync::Mutex::new(Vec::new()));
    let done = Arc::new(AtomicU64::new(0));
    {
        let got = got.clone();
        let done = done.clone();
        dom.register(RESP, move |m| {
            assert!(m.is_reply());
            got.lock().unwrap().push((m.tag(), m.arg(), m.payload().to_vec()));
            done.fetch_add(1, Ordering::Release);
        })
        .unwrap();
    }
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let dom = &dom;
        s.spawn(move || {
            let server = dom.join().unwrap();
            tx.send(server.id()).unwrap();
            while stop_rx.try_recv().is_err() {
                match server.wait(Some(Duration::from_millis(20))) {
                    Ok(_) => {}
                    Err(e) if e.is_timeout() => {}
                    Err(e) => panic!("server wait: {}", e),
                }
            }
        });
        let server: PlaceId = rx.recv().unwrap();
        let client = dom.join().unwrap();
        assert_ne!(client.id(), server);
        for i in 0..100u64 {
            client.send_with(server, REQ, i, &[1, 2, 3, i as u8], Flags::NONE).unwrap();
        }
        while done.load(Ordering::Acquire) < 100 {
            client.wait_for(&done, done.load(Ordering::Acquire), Some(Duration::from_secs(30))).unwrap();
        }
        drop(client);
        stop_tx.send(()).unwrap();
    });
    let got = got.lock().unwrap();
    assert_eq!(got.len(), 100);
    for (i, (tag, arg, p)) in got.iter().enumerate() {
        assert_eq!(*tag, i as u64, "replies in order, tagged with the request's arg");
        assert_eq!(*arg, 2 * i as u64);
        assert_eq!(p, &vec![i as u8, 3, 2, 1]);
    }
}

#[test]
fn wait_times_out() {
    let dom = Domain::new().unwrap();
    let p = dom.join().unwrap();
    let t = Instant::now();
    let e = p.wait(Some(Duration::from_millis(50))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout);
    assert!(e.is_timeout());
    assert!(t.elapsed() >= Duration::from_millis(45));
    let word = AtomicU64::new(7);
    let e = p.wait_for(&word, 7, Some(Duration::from_millis(10))).unwrap_err();
    assert!(e.is_timeout(), "{}", e);
    assert!(!e.message.is_empty());
}

#[test]
fn timed_send_to_a_full_queue_times_out() {
    // 8 slots: the receiver never polls, so the ring fills.
    let dom = Domain::builder().ring_slots(8).build().unwrap();
    dom.register(REQ, |_| {}).unwrap();
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let dom = &dom;
        s.spawn(move || {
            let idle = dom.join().unwrap();
            tx.send(idle.id()).unwrap();
            stop_rx.recv().unwrap();
            drop(idle); // handles what was queued
        });
        let dest = rx.recv().unwrap();
        let p = dom.join().unwrap();
        let mut sent = 0;
        let err = loop {
            match p.send_with(dest, REQ, 0, &[], Flags::NONBLOCK) {
                Ok(()) => sent += 1,
                Err(e) => break e,
            }
            assert!(sent < 1000, "an 8-slot ring never filled");
        };
        assert_eq!(err.kind(), ErrorKind::WouldBlock);
        let t = Instant::now();
        let e = p.send_timed(dest, REQ, 0, &[], Flags::NONE, Duration::from_millis(50)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Timeout, "{}", e);
        assert!(t.elapsed() >= Duration::from_millis(45));
        let e = p.send_timed(dest, REQ, 0, &[], Flags::NONE, Instant::now() + Duration::from_millis(20)).unwrap_err();
        assert!(e.is_timeout());
        stop_tx.send(()).unwrap();
    });
}

#[test]
fn errors_carry_nemo_last_error_text() {
    let dom = Domain::new().unwrap();
    let p = dom.join().unwrap();
    // Action 9 has no handler.
    let e = p.send(p.id(), 9, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoHandler);
    assert!(e.message.contains("nemo_am_send"), "message: {}", e.message);
    assert!(e.message.contains("ENOENT"), "message: {}", e.message);
    assert_eq!(e.to_string(), e.message);
    // A payload too large.
    dom.register(REQ, |_| {}).unwrap();
    let e = p.send_with(p.id(), REQ, 0, &[0u8; nemo::PAYLOAD_MAX + 1], Flags::NONE).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge);
    assert!(e.message.contains("EMSGSIZE"), "message: {}", e.message);
    // Registered twice.
    let e = dom.register(REQ, |_| {}).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AlreadyRegistered);
    assert!(e.message.contains("EEXIST"), "message: {}", e.message);
    // A thread that is already a place.
    let e = dom.join().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AlreadyAPlace);
    // A place that left.
    let gone = std::thread::scope(|s| s.spawn(|| dom.join().unwrap().id()).join().unwrap());
    let e = p.send(gone, REQ, 0).unwrap_err();
    assert!(e.is_no_place(), "{}", e);
    assert!(e.message.contains("ESRCH"), "message: {}", e.message);
    let boxed: Box<dyn std::error::Error> = Box::new(e);
    assert!(!boxed.to_string().is_empty());
}

#[test]
fn notifications_and_self_sends() {
    let dom = Domain::new().unwrap();
    let hits = Arc::new(AtomicU64::new(0));
    let h = hits.clone();
    dom.register(REQ, move |m| {
        h.fetch_add(m.arg(), Ordering::Relaxed);
    })
    .unwrap();
    let mut p = dom.join().unwrap();
    let seen = Arc::new(AtomicU64::new(0));
    let s2 = seen.clone();
    let me = p.id();
    p.set_notify_handler(move |src, chan| {
        assert_eq!(src, me);
        s2.fetch_add(chan as u64, Ordering::Relaxed);
    })
    .unwrap();
    p.notify(p.id(), 5, Flags::NONE).unwrap();
    p.notify_timed(p.id(), 6, Flags::NONE, Duration::from_secs(1)).unwrap();
    p.send(p.id(), REQ, 40).unwrap();
    let mut n = 0;
    while n < 3 {
        n += p.wait(Some(Duration::from_secs(10))).unwrap();
    }
    assert_eq!(seen.load(Ordering::Relaxed), 11);
    assert_eq!(hits.load(Ordering::Relaxed), 40);
    assert_eq!(p.poll().unwrap(), 0);
    assert_eq!(PlaceId::current(), Some(p.id()));
    let c = dom.counters().unwrap();
    assert!(c.am_handled >= 1 && c.notify_handled >= 2);
    drop(p);
    assert_eq!(PlaceId::current(), None);
}

#[test]
fn place_is_not_send() {
    // Compile-time property, documented: `fn f<T: Send>() {} f::<nemo::Place>()`
    // does not compile.  Here: Domain is Send + Sync.
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Domain>();
    assert_send_sync::<PlaceId>();
}
