//! A tokio task on a current-thread runtime receives messages through the
//! place's descriptor while other threads send.
#![cfg(feature = "tokio")]
use nemo::{Domain, Flags};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

const MSG: u32 = 0;
const SENDERS: u64 = 2;
const EACH: u64 = 500;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap()
}

#[test]
fn tokio_task_receives_through_the_fd() {
    let dom = Domain::new().unwrap();
    let sum = Arc::new(AtomicU64::new(0));
    let count = Arc::new(AtomicU64::new(0));
    {
        let (sum, count) = (sum.clone(), count.clone());
        dom.register(MSG, move |m| {
            sum.fetch_add(m.arg(), Ordering::Relaxed);
            count.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
    }
    std::thread::scope(|s| {
        let place = dom.join().unwrap();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let me = place.id();
        let dom = &dom;
        let go_rx = Arc::new(std::sync::Mutex::new(go_rx));
        for t in 0..SENDERS {
            let go_rx = go_rx.clone();
            s.spawn(move || {
                let p = dom.join().unwrap();
                go_rx.lock().unwrap().recv().unwrap();
                for i in 0..EACH {
                    p.send_with(me, MSG, t * EACH + i, &[], Flags::NONE).unwrap();
                    if i % 50 == 0 {
                        std::thread::yield_now();
                    }
                }
            });
        }
        let rt = runtime();
        let local = tokio::task::LocalSet::new();
        let handled = local.block_on(&rt, async {
            // The senders start as the first ready() is awaited (it
            // registers the descriptor then): messages arrive before the
            // arming and while the task is parked in the reactor.
            let mut handled = 0u64;
            let first = place.ready();
            for _ in 0..SENDERS {
                go_tx.send(()).unwrap();
            }
            handled += u64::from(first.await.unwrap());
            while count.load(Ordering::Relaxed) < SENDERS * EACH {
                let n = place.ready().await.unwrap();
                assert!(n > 0);
                handled += u64::from(n);
            }
            handled
        });
        assert!(handled >= SENDERS * EACH);
        drop(place);
    });
    let n = SENDERS * EACH;
    assert_eq!(count.load(Ordering::Relaxed), n);
    assert_eq!(sum.load(Ordering::Relaxed), n * (n - 1) / 2);
}

#[test]
fn async_fd_becomes_readable() {
    let dom = Domain::new().unwrap();
    let got = Arc::new(AtomicU64::new(0));
    let g = got.clone();
    dom.register(MSG, move |m| g.store(m.arg(), Ordering::Relaxed)).unwrap();
    let place = dom.join().unwrap();
    let me = place.id();
    std::thread::scope(|s| {
        let rt = runtime();
        rt.block_on(async {
            let afd = place.async_fd().unwrap();
            s.spawn(|| {
                let p = dom.join().unwrap();
                p.send(me, MSG, 42).unwrap();
            });
            loop {
                let mut guard = afd.readable().await.unwrap();
                place.poll().unwrap();
                guard.clear_ready();
                if got.load(Ordering::Relaxed) == 42 {
                    break;
                }
            }
        });
    });
}
