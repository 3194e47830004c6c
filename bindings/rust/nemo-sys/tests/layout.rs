//! The FFI checked against the C headers: a C program, compiled with the
//! system C compiler ($CC, else `cc`) against the headers nemo-sys was
//! built for, prints sizeof / alignof / offsetof of every #[repr(C)]
//! struct and the value of every constant; each must equal Rust's.  And
//! every function declared in src/lib.rs must be declared in a header.
use nemo_sys::*;
use std::mem::{align_of, size_of, MaybeUninit};
use std::path::PathBuf;
use std::process::Command;

macro_rules! offset_of {
    ($t:ty, $f:ident) => {{
        let u = MaybeUninit::<$t>::uninit();
        let base = u.as_ptr();
        // Only the address is computed; nothing is read.
        let field = unsafe { std::ptr::addr_of!((*base).$f) };
        (field as usize) - (base as usize)
    }};
}

fn size_of_pointee<T>(_: *const T) -> usize {
    size_of::<T>()
}

macro_rules! field_size {
    ($t:ty, $f:ident) => {{
        let u = MaybeUninit::<$t>::uninit();
        size_of_pointee(unsafe { std::ptr::addr_of!((*u.as_ptr()).$f) })
    }};
}

/// (C expression, Rust value) pairs.
fn expected() -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = Vec::new();
    macro_rules! st {
        ($t:ident, $c:expr, [$($f:ident),*]) => {
            v.push((format!("sizeof({})", $c), size_of::<$t>() as u64));
            v.push((format!("_Alignof({})", $c), align_of::<$t>() as u64));
            $( v.push((format!("offsetof({}, {})", $c, stringify!($f)), offset_of!($t, $f) as u64));
               v.push((format!("sizeof((({} *)0)->{})", $c, stringify!($f)), field_size!($t, $f) as u64)); )*
        };
    }
    macro_rules! k {
        ($($c:ident),*) => { $( v.push((stringify!($c).to_string(), $c as u64)); )* };
    }
    st!(timespec, "struct timespec", [tv_sec, tv_nsec]);
    st!(nemo_wait_policy, "nemo_wait_policy", [kind, spin_ns]);
    st!(nemo_domain_attr, "nemo_domain_attr",
        [max_places, ring_slots, max_actions, max_events, irq_signal, overflow_max, flags]);
    st!(nemo_domain_counters, "nemo_domain_counters",
        [am_sent, am_handled, notify_sent, notify_handled, kicks_futex, kicks_signal, kicks_avoided,
         kicks_skipped, full_waits, send_failures, interrupts, sleeps, overflowed, overflow_dropped,
         kicks_fd, poll_checks, kicks_deferred, grants, grant_revokes, room_kicks]);
    st!(nemo_place_attr, "nemo_place_attr", [flags, cpu, policy, context]);
    st!(nemo_am_msg, "nemo_am_msg",
        [src, dest, action, event, arg, payload, len, context, tag, is_reply, place_ctx]);
    v.push(("sizeof(nemo_place_id)".into(), size_of::<nemo_place_id>() as u64));
    v.push(("sizeof(nemo_wait_kind)".into(), size_of::<nemo_wait_kind>() as u64));
    v.push(("sizeof(nemo_am_context)".into(), size_of::<nemo_am_context>() as u64));
    v.push(("sizeof(clockid_t)".into(), size_of::<clockid_t>() as u64));
    v.push(("NEMO_AM_EVENT(5)".into(), NEMO_AM_EVENT(5) as u64));
    k!(NEMO_PLACE_NONE, NEMO_PLACE_ALL, NEMO_PLACES_MAX, NEMO_OVERFLOW_MAX, CLOCK_MONOTONIC,
       NEMO_WAIT_DEFAULT, NEMO_WAIT_SPIN, NEMO_WAIT_BLOCK, NEMO_WAIT_HYBRID, NEMO_WAIT_ADAPTIVE,
       NEMO_DOMAIN_DELAYS, NEMO_PLACE_PIN, NEMO_PLACE_INTERRUPTS, NEMO_PUSH, NEMO_NONBLOCK, NEMO_MORE,
       NEMO_AM_PAYLOAD_MAX, NEMO_AM_ACTIONS_MAX, NEMO_AM_EVENTS_MAX, NEMO_AM_NO_EVENT,
       NEMO_NOTIFY_CHAN_MAX, NEMO_NOTIFY_FIFO_LEN,
       NEMO_AM_CTX_POLL, NEMO_AM_CTX_WAIT, NEMO_AM_CTX_INTERRUPT, NEMO_AM_CTX_PROGRESS);
    {
        use nemo_sys::errno::*;
        k!(ESRCH, EINTR, EAGAIN, ENOMEM, EBUSY, EEXIST, EXDEV, EINVAL, ENOSPC, ERANGE, EDEADLK, ENOENT,
           EIDRM, EMSGSIZE, ENOBUFS, ENOTCONN, ETIMEDOUT, EALREADY, ECONNRESET);
    }
    v
}

fn include_dirs() -> Vec<String> {
    env!("NEMO_SYS_INCLUDE_DIRS").split(':').filter(|s| !s.is_empty()).map(String::from).collect()
}

#[test]
fn layout_matches_headers() {
    let exp = expected();
    let mut c = String::from(
        "#define _GNU_SOURCE\n#include <nemo/nemo.h>\n#include <errno.h>\n#include <stddef.h>\n\
         #include <stdio.h>\nint main(void)\n{\n",
    );
    for (expr, _) in &exp {
        c.push_str(&format!(
            "\tprintf(\"%s=%llu\\n\", \"{}\", (unsigned long long)({}));\n",
            expr.replace('"', "\\\""),
            expr
        ));
    }
    c.push_str("\treturn 0;\n}\n");

    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nemo-sys-layout");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, &c).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.arg("-std=gnu11");
    for d in include_dirs() {
        cmd.arg(format!("-I{}", d));
    }
    cmd.arg("-o").arg(&exe).arg(&src);
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run the C compiler {}: {}", cc, e));
    assert!(out.status.success(), "{:?} failed:\n{}", cmd, String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    let text = String::from_utf8(run.stdout).unwrap();
    let mut bad = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), exp.len());
    for ((expr, want), line) in exp.iter().zip(lines) {
        let (name, val) = line.rsplit_once('=').unwrap();
        assert_eq!(name, expr);
        let c_val: u64 = val.parse().unwrap();
        if c_val != *want {
            bad.push(format!("{}: C says {}, Rust says {}", expr, c_val, want));
        }
    }
    assert!(bad.is_empty(), "FFI differs from the headers:\n{}", bad.join("\n"));
    println!("{} sizes, offsets and constants agree with the headers", exp.len());
}

#[test]
fn every_function_is_in_the_headers() {
    let mut headers = String::new();
    for d in include_dirs() {
        if let Ok(rd) = std::fs::read_dir(PathBuf::from(&d).join("nemo")) {
            for e in rd.flatten() {
                if e.path().extension().map_or(false, |x| x == "h") {
                    headers.push_str(&std::fs::read_to_string(e.path()).unwrap());
                }
            }
        }
    }
    assert!(headers.contains("nemo_am_send("), "no nemo headers found in {:?}", include_dirs());
    let lib = include_str!("../src/lib.rs");
    let mut names = Vec::new();
    for line in lib.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("pub fn ") {
            let name = rest.split('(').next().unwrap();
            if name.starts_with("nemo_") {
                names.push(name.to_string());
            }
        }
    }
    assert!(names.len() > 20, "parsed only {:?}", names);
    let missing: Vec<&String> = names.iter().filter(|n| !headers.contains(&format!("{}(", n))).collect();
    assert!(missing.is_empty(), "declared in nemo-sys but not in the headers: {:?}", missing);
    // nemo_place_index and NEMO_AM_EVENT are `pub const fn` (static inline / macro in C).
    assert!(headers.contains("nemo_place_index(") && headers.contains("NEMO_AM_EVENT("));
}

#[test]
fn links_and_runs() {
    let v = unsafe { std::ffi::CStr::from_ptr(nemo_version()) };
    assert!(!v.to_bytes().is_empty());
    let mut d: *mut nemo_domain = std::ptr::null_mut();
    assert_eq!(unsafe { nemo_domain_create(std::ptr::null(), &mut d) }, 0);
    assert_eq!(unsafe { nemo_domain_destroy(d) }, 0);
}
