//! A worker pool: WORKERS threads join a domain as places and serve
//! tasks; a client place sends TASKS tasks round-robin and collects the
//! replies with `wait_for` (each reply carries its task's number as tag).
//!
//!     cargo run --example pool [TASKS [WORKERS]]
//!
//! No flow control is written here: a worker whose reply finds the
//! client's queue full keeps it (nemo/domain.h, "Sends from handlers"),
//! and the client's sends wait for room while serving its replies.
use nemo::{Domain, Flags};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

const TASK: u32 = 0;
const RESULT: u32 = 1;

fn work(x: u64) -> u64 {
    x.wrapping_mul(x).wrapping_add(1)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let tasks: u64 = args.next().map(|a| a.parse().expect("TASKS")).unwrap_or(100_000);
    let workers: usize = args.next().map(|a| a.parse().expect("WORKERS")).unwrap_or(4);

    let dom = Domain::builder().max_places(workers as u32 + 1).build().expect("domain");
    // Runs on a worker for each task: reply with the result.
    dom.register(TASK, |m| {
        if let Err(e) = m.reply(RESULT, work(m.arg()), &[]) {
            eprintln!("pool: reply: {}", e);
        }
    })
    .expect("register TASK");
    // Runs on the client for each reply: the tag is the task's number.
    let replies = Arc::new(AtomicU64::new(0));
    let wrong = Arc::new(AtomicU64::new(0));
    let seen = Arc::new(Mutex::new(vec![false; tasks as usize]));
    {
        let (replies, wrong, seen) = (replies.clone(), wrong.clone(), seen.clone());
        dom.register(RESULT, move |m| {
            let t = m.tag();
            let mut seen = seen.lock().unwrap();
            if !m.is_reply() || t >= tasks || m.arg() != work(t) || seen[t as usize] {
                wrong.fetch_add(1, Ordering::Relaxed);
            } else {
                seen[t as usize] = true;
            }
            replies.fetch_add(1, Ordering::Release);
        })
        .expect("register RESULT");
    }

    let stop = AtomicBool::new(false);
    let start = Instant::now();
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        for _ in 0..workers {
            let tx = tx.clone();
            let (dom, stop) = (&dom, &stop);
            s.spawn(move || {
                let me = dom.join().expect("worker join");
                tx.send(me.id()).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    match me.wait(Some(Duration::from_millis(50))) {
                        Ok(_) => {}
                        Err(e) if e.is_timeout() => {}
                        Err(e) => panic!("worker wait: {}", e),
                    }
                }
                // Dropping `me` leaves, handling what is still queued.
            });
        }
        let ids: Vec<_> = (0..workers).map(|_| rx.recv().unwrap()).collect();

        let client = dom.join().expect("client join");
        for t in 0..tasks {
            client.send_with(ids[(t % workers as u64) as usize], TASK, t, &[], Flags::NONE).expect("send");
        }
        loop {
            let got = replies.load(Ordering::Acquire);
            if got >= tasks {
                break;
            }
            client.wait_for(&replies, got, Some(Duration::from_secs(60))).expect("wait for replies");
        }
        drop(client);
        stop.store(true, Ordering::Relaxed);
    });
    let dt = start.elapsed();
    let wrong = wrong.load(Ordering::Relaxed);
    println!(
        "pool: {} tasks on {} workers: {} replies, {} wrong, {:.0} ns/task",
        tasks,
        workers,
        replies.load(Ordering::Relaxed),
        wrong,
        dt.as_nanos() as f64 / tasks as f64
    );
    if wrong != 0 {
        std::process::exit(1);
    }
}
