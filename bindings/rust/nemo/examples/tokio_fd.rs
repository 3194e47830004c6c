//! A place served by tokio: a current-thread runtime's task waits on the
//! place's descriptor (`place.ready().await`: readable, then nemo_poll)
//! while SENDERS plain threads send it messages, and another local task
//! shares the same thread.
//!
//!     cargo run --features tokio --example tokio_fd
//!
//! The place is bound to the thread that joined, and so is every future
//! that uses it (they are not Send): run them with `block_on` on a
//! current-thread runtime, or `spawn_local` in a `LocalSet`, on that thread.
use nemo::{Domain, Flags};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const HELLO: u32 = 0;
const SENDERS: u64 = 3;
const EACH: u64 = 1000;

fn main() {
    let dom = Domain::new().expect("domain");
    let received = Arc::new(AtomicU64::new(0));
    {
        let received = received.clone();
        dom.register(HELLO, move |_m| {
            received.fetch_add(1, Ordering::Relaxed);
        })
        .expect("register");
    }

    let place = dom.join().expect("join");
    let me = place.id();
    std::thread::scope(|s| {
        for t in 0..SENDERS {
            let dom = &dom;
            s.spawn(move || {
                let p = dom.join().expect("sender join");
                for i in 0..EACH {
                    p.send_with(me, HELLO, t * EACH + i, &[], Flags::NONE).expect("send");
                }
            });
        }

        let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().expect("runtime");
        let local = tokio::task::LocalSet::new();
        let wakeups = Rc::new(Cell::new(0u64));
        local.block_on(&rt, async {
            // Another task on the same thread, to show the loop is shared.
            let ticks = tokio::task::spawn_local(async {
                for _ in 0..3 {
                    tokio::task::yield_now().await;
                }
            });
            while received.load(Ordering::Relaxed) < SENDERS * EACH {
                place.ready().await.expect("ready");
                wakeups.set(wakeups.get() + 1);
            }
            ticks.await.unwrap();
        });
        println!(
            "tokio_fd: {} messages from {} threads in {} wake-ups of the task",
            received.load(Ordering::Relaxed),
            SENDERS,
            wakeups.get()
        );
    });
    drop(place);
}
