//! Issue 15 experiment: how much server CPU per request does batching the socket syscalls through
//! io_uring save on this kernel, against the epoll loop every Redis-style server runs?
//!
//! Two minimal single-threaded RESP servers that answer `PING` with `+PONG` (anything else with an
//! error, so redis-benchmark's start-up `CONFIG GET` fails politely):
//!
//! * `epoll`: Redis's loop: `epoll_wait`, then for each readable socket one `read` and one `write`
//!   of its replies (level-triggered), ~2.2 syscalls per request at `-P 1` with 50 clients, the same
//!   count as redis-server and hyperbloom (issue-15 CPU note, `perf stat -e raw_syscalls:sys_enter`).
//! * `uring`: one receive kept in flight per connection; each completion's replies are queued as a
//!   send plus the next receive, and everything queued goes to the kernel with the wait for the next
//!   completions in one `io_uring_enter`. Variants: `uring-coop` (`SINGLE_ISSUER | COOP_TASKRUN`),
//!   `uring-defer` (`SINGLE_ISSUER | DEFER_TASKRUN`: completions are run only inside our enter).
//!
//! ```text
//! cargo build --release --example uring_ping
//! taskset -c 1 target/release/examples/uring_ping epoll 7001 &
//! taskset -c 0 redis-benchmark -p 7001 -c 50 -P 1 -n 300000 -t ping_mbulk
//! ```
//! `scripts/uring_floor.py` runs these, redis-server and hyperbloom pinned, interleaved, and prints
//! CPU µs per request and syscalls per request.
//!
//! This is a measuring tool, not server code: no output limits, no pushes, buffers grow freely.

use std::io;
use std::net::TcpListener;
use std::os::fd::{IntoRawFd, RawFd};

const BUF: usize = 16 * 1024;

/// Appends the reply to every complete request at the front of `input` to `out`; returns the
/// bytes consumed.
fn answer(input: &[u8], out: &mut Vec<u8>) -> usize {
    let mut at = 0;
    while let Some(used) = one_request(&input[at..], out) {
        at += used;
    }
    at
}

/// One multibulk request: `*N\r\n` then N × `$L\r\n<L bytes>\r\n`. `None` when incomplete.
fn one_request(b: &[u8], out: &mut Vec<u8>) -> Option<usize> {
    let (n, mut at) = number(b, b'*')?;
    let mut first: &[u8] = b"";
    for i in 0..n {
        let (len, next) = number(&b[at..], b'$')?;
        let start = at + next;
        if b.len() < start + len + 2 {
            return None;
        }
        if i == 0 {
            first = &b[start..start + len];
        }
        at = start + len + 2;
    }
    if first.eq_ignore_ascii_case(b"PING") {
        out.extend_from_slice(b"+PONG\r\n");
    } else {
        out.extend_from_slice(b"-ERR only PING here\r\n");
    }
    Some(at)
}

/// `<tag><digits>\r\n`: the number and the bytes it took.
fn number(b: &[u8], tag: u8) -> Option<(usize, usize)> {
    if b.first() != Some(&tag) {
        return None;
    }
    let end = b.iter().position(|&c| c == b'\r')?;
    if b.len() < end + 2 {
        return None;
    }
    let n = std::str::from_utf8(&b[1..end]).ok()?.parse().ok()?;
    Some((n, end + 2))
}

fn listen(port: u16) -> io::Result<RawFd> {
    let l = TcpListener::bind(("127.0.0.1", port))?;
    l.set_nonblocking(true)?;
    Ok(l.into_raw_fd())
}

fn nodelay(fd: RawFd) {
    let one: libc::c_int = 1;
    // SAFETY: fd is an open socket; the option value outlives the call.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// epoll
// ---------------------------------------------------------------------------------------------

struct EConn {
    input: Vec<u8>,
    out: Vec<u8>,
}

fn run_epoll(port: u16) -> io::Result<()> {
    let lfd = listen(port)?;
    // SAFETY (this function): plain syscalls on descriptors this loop owns; buffers outlive calls.
    let ep = unsafe { libc::epoll_create1(0) };
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: lfd as u64,
    };
    unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, lfd, &mut ev) };
    let mut conns: Vec<Option<EConn>> = Vec::new();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut chunk = vec![0u8; BUF];
    loop {
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, -1) };
        if n < 0 {
            continue;
        }
        for e in &events[..n as usize] {
            let fd = e.u64 as RawFd;
            if fd == lfd {
                loop {
                    let c = unsafe {
                        libc::accept4(
                            lfd,
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                            libc::SOCK_NONBLOCK,
                        )
                    };
                    if c < 0 {
                        break;
                    }
                    nodelay(c);
                    let mut ev = libc::epoll_event {
                        events: libc::EPOLLIN as u32,
                        u64: c as u64,
                    };
                    unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, c, &mut ev) };
                    if conns.len() <= c as usize {
                        conns.resize_with(c as usize + 1, || None);
                    }
                    conns[c as usize] = Some(EConn {
                        input: Vec::new(),
                        out: Vec::new(),
                    });
                }
                continue;
            }
            let Some(conn) = conns.get_mut(fd as usize).and_then(Option::as_mut) else {
                continue;
            };
            let r = unsafe { libc::read(fd, chunk.as_mut_ptr().cast(), BUF) };
            if r == 0 || (r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock) {
                unsafe { libc::close(fd) };
                conns[fd as usize] = None;
                continue;
            }
            if r < 0 {
                continue;
            }
            conn.input.extend_from_slice(&chunk[..r as usize]);
            let used = answer(&conn.input, &mut conn.out);
            conn.input.drain(..used);
            if !conn.out.is_empty() {
                let w = unsafe { libc::write(fd, conn.out.as_ptr().cast(), conn.out.len()) };
                if w > 0 {
                    conn.out.drain(..w as usize);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// io_uring
// ---------------------------------------------------------------------------------------------

struct UConn {
    fd: RawFd,
    buf: Box<[u8]>,
    input: Vec<u8>,
    /// Bytes handed to the kernel in the send in flight (kept alive until it completes).
    sending: Vec<u8>,
    /// Replies produced while a send is in flight.
    next: Vec<u8>,
    in_flight: bool,
}

const ACCEPT: u64 = 0;
const RECV: u64 = 1;
const SEND: u64 = 2;

fn run_uring(port: u16, variant: &str) -> io::Result<()> {
    use io_uring::{opcode, squeue, types, IoUring};
    let lfd = listen(port)?;
    let mut builder = IoUring::builder();
    match variant {
        "uring-coop" => {
            builder.setup_single_issuer().setup_coop_taskrun();
        }
        "uring-defer" => {
            builder.setup_single_issuer().setup_defer_taskrun();
        }
        _ => {}
    }
    let mut ring = builder.build(4096)?;
    let mut conns: Vec<Option<UConn>> = Vec::new();
    let mut queued: Vec<squeue::Entry> = Vec::new();
    queued.push(
        opcode::AcceptMulti::new(types::Fd(lfd))
            .build()
            .user_data(ACCEPT),
    );
    let recv = |c: &mut UConn, slot: usize| {
        opcode::Recv::new(types::Fd(c.fd), c.buf.as_mut_ptr(), c.buf.len() as u32)
            .build()
            .user_data(RECV | (slot as u64) << 8)
    };
    let send = |c: &UConn, slot: usize| {
        opcode::Send::new(types::Fd(c.fd), c.sending.as_ptr(), c.sending.len() as u32)
            .build()
            .user_data(SEND | (slot as u64) << 8)
    };
    loop {
        {
            let mut sq = ring.submission();
            for e in queued.drain(..) {
                // SAFETY: every buffer an entry points to lives in a boxed connection that is
                // dropped only after its last completion.
                if unsafe { sq.push(&e) }.is_err() {
                    sq.sync();
                    return Err(io::Error::other("submission queue full"));
                }
            }
        }
        ring.submit_and_wait(1)?;
        let done: Vec<(u64, i32)> = ring
            .completion()
            .map(|c: io_uring::cqueue::Entry| (c.user_data(), c.result()))
            .collect();
        for (ud, res) in done {
            let slot = (ud >> 8) as usize;
            match ud & 0xff {
                ACCEPT => {
                    if res < 0 {
                        continue;
                    }
                    nodelay(res);
                    let slot = match conns.iter().position(Option::is_none) {
                        Some(s) => s,
                        None => {
                            conns.push(None);
                            conns.len() - 1
                        }
                    };
                    conns[slot] = Some(UConn {
                        fd: res,
                        buf: vec![0u8; BUF].into_boxed_slice(),
                        input: Vec::new(),
                        sending: Vec::new(),
                        next: Vec::new(),
                        in_flight: false,
                    });
                    queued.push(recv(conns[slot].as_mut().unwrap(), slot));
                }
                RECV => {
                    let Some(c) = conns[slot].as_mut() else {
                        continue;
                    };
                    if res <= 0 {
                        if !c.in_flight {
                            // SAFETY: nothing of this connection is in flight any more.
                            unsafe { libc::close(c.fd) };
                            conns[slot] = None;
                        } else {
                            c.fd = -c.fd - 1; // closed when its send completes
                        }
                        continue;
                    }
                    c.input.extend_from_slice(&c.buf[..res as usize]);
                    let used = answer(&c.input, &mut c.next);
                    c.input.drain(..used);
                    if !c.in_flight && !c.next.is_empty() {
                        std::mem::swap(&mut c.sending, &mut c.next);
                        c.in_flight = true;
                        queued.push(send(c, slot));
                    }
                    queued.push(recv(c, slot));
                }
                SEND => {
                    let Some(c) = conns[slot].as_mut() else {
                        continue;
                    };
                    c.in_flight = false;
                    if c.fd < 0 {
                        // SAFETY: the receive already ended; this was the last operation.
                        unsafe { libc::close(-c.fd - 1) };
                        conns[slot] = None;
                        continue;
                    }
                    if res > 0 {
                        c.sending.drain(..res as usize);
                    }
                    if c.sending.is_empty() {
                        std::mem::swap(&mut c.sending, &mut c.next);
                    }
                    if !c.sending.is_empty() {
                        c.in_flight = true;
                        queued.push(send(c, slot));
                    }
                }
                _ => {}
            }
        }
    }
}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(mode), Some(port)) = (args.get(1), args.get(2).and_then(|p| p.parse().ok())) else {
        eprintln!("usage: uring_ping epoll|uring|uring-coop|uring-defer PORT");
        std::process::exit(2);
    };
    match mode.as_str() {
        "epoll" => run_epoll(port),
        m if m.starts_with("uring") => run_uring(port, m),
        _ => {
            eprintln!("unknown mode {mode}");
            std::process::exit(2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_complete_requests_only() {
        let mut out = Vec::new();
        let input =
            b"*1\r\n$4\r\nPING\r\n*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$4\r\nsave\r\n*1\r\n$4\r\nPI";
        let used = answer(input, &mut out);
        assert_eq!(out, b"+PONG\r\n-ERR only PING here\r\n");
        assert_eq!(&input[used..], b"*1\r\n$4\r\nPI");
    }
}
