//! Tests of the request parser. Every example marked *verified* in clients.md §1 is here, plus the
//! edge cases checked by hand against a live Redis 7.0.15 (NUL bytes, CR in the `got` byte, 64 KiB
//! thresholds). Each byte-level case runs twice: with the whole input in one buffer and fed one byte at
//! a time, which must give the same requests and the same error.

use super::*;
use proptest::prelude::*;

type Reqs = Vec<Vec<Vec<u8>>>;

/// Feeds `chunks` one after the other, draining every complete request after each. Stops at the first
/// error. Also checks that the parser never holds a request it could have returned.
fn feed(chunks: &[&[u8]], limits: &ParserLimits) -> (Reqs, Option<ProtocolError>, usize) {
    let mut p = RequestParser::new();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match p.next_request(&mut buf, limits) {
                Ok(Some(req)) => {
                    assert!(!req.is_empty(), "a request is never empty");
                    out.push(req.iter().map(|a| a.to_vec()).collect());
                }
                Ok(None) => break,
                Err(e) => return (out, Some(e), buf.len()),
            }
        }
    }
    (out, None, buf.len())
}

/// Like [`feed`] through the batch API (`next_request_into`, one flat argument vector), or through
/// the general path alone (`fast == false`), which the fast path must always agree with.
fn feed_flat(
    chunks: &[&[u8]],
    limits: &ParserLimits,
    fast: bool,
) -> (Reqs, Option<ProtocolError>, usize) {
    let mut p = RequestParser::new();
    let mut buf = BytesMut::new();
    let mut flat = vec![Bytes::from_static(b"sentinel")];
    let mut out = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            let got = if fast {
                p.next_request_into(&mut buf, limits, &mut flat)
            } else {
                p.general_request(&mut buf, limits).map(|r| {
                    let n = r.as_ref().map_or(0, |r| r.len());
                    flat.extend(r.unwrap_or_default());
                    n
                })
            };
            match got {
                Ok(0) => break,
                Ok(n) => {
                    let req = flat.split_off(flat.len() - n);
                    out.push(req.iter().map(|a| a.to_vec()).collect());
                }
                Err(e) => return (out, Some(e), buf.len()),
            }
        }
    }
    assert_eq!(flat, vec![Bytes::from_static(b"sentinel")], "appends only");
    (out, None, buf.len())
}

fn whole(data: &[u8], limits: &ParserLimits) -> (Reqs, Option<ProtocolError>) {
    let (r, e, _) = feed(&[data], limits);
    (r, e)
}

fn bytewise(data: &[u8], limits: &ParserLimits) -> (Reqs, Option<ProtocolError>) {
    let chunks: Vec<&[u8]> = data.chunks(1).collect();
    let (r, e, _) = feed(&chunks, limits);
    (r, e)
}

fn req(args: &[&[u8]]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.to_vec()).collect()
}

/// Asserts the requests and the error (if any) parsed from `data`, whole and byte by byte.
fn check_with(data: &[u8], limits: &ParserLimits, reqs: &[&[&[u8]]], err: Option<ProtocolError>) {
    let want: Reqs = reqs.iter().map(|r| req(r)).collect();
    assert_eq!(
        whole(data, limits),
        (want.clone(), err.clone()),
        "whole: {data:?}"
    );
    assert_eq!(bytewise(data, limits), (want, err), "bytewise: {data:?}");
}

fn check(data: &[u8], reqs: &[&[&[u8]]], err: Option<ProtocolError>) {
    check_with(data, &ParserLimits::default(), reqs, err)
}

fn unauth() -> ParserLimits {
    ParserLimits {
        authenticated: false,
        ..ParserLimits::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Multibulk
// ---------------------------------------------------------------------------------------------

#[test]
fn multibulk_basic_and_pipelined() {
    check(b"*1\r\n$4\r\nPING\r\n", &[&[b"PING"]], None);
    check(
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
        &[&[b"SET", b"k", b"value"], &[b"GET", b"k"]],
        None,
    );
}

#[test]
fn multibulk_binary_and_empty_args() {
    check(
        b"*3\r\n$0\r\n\r\n$4\r\n\r\n\0\xff\r\n$2\r\n$*\r\n",
        &[&[b"", b"\r\n\0\xff", b"$*"]],
        None,
    );
}

#[test]
fn empty_requests_are_skipped() {
    // verified: `*-5\r\nPING\r\n` → one PING.
    check(b"*-5\r\nPING\r\n", &[&[b"PING"]], None);
    check(b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n", &[&[b"PING"]], None);
    check(
        b"*1\r\n$4\r\nPING\r\n*0\r\nPING\r\n",
        &[&[b"PING"], &[b"PING"]],
        None,
    );
    check(b"*0\r\n", &[], None);
    // -2147483648 and below still parse as integers: empty.
    check(b"*-9223372036854775808\r\nPING\n", &[&[b"PING"]], None);
}

#[test]
fn terminators_are_not_checked() {
    // verified: the two bytes after bulk data are skipped unchecked.
    check(b"*1\r\n$4\r\nPING\rX", &[&[b"PING"]], None);
    check(b"*1\r\n$4\r\nPINGab", &[&[b"PING"]], None);
    // The byte after a count or length line's `\r` is skipped unchecked too.
    check(b"*1\rX$4\rYPING\r\n", &[&[b"PING"]], None);
}

#[test]
fn incomplete_requests_wait() {
    for data in [
        &b"*"[..],
        b"*1",
        b"*1\r",
        b"*1\r\n",
        b"*1\r\n$",
        b"*1\r\n$4",
        b"*1\r\n$4\r",
        b"*1\r\n$4\r\nPI",
        b"*1\r\n$4\r\nPING",
        b"*1\r\n$4\r\nPING\r",
        b"*2147483647\r\n",
        b"*1\r\n$536870912\r\n",
        b"*1\r\nX", // the `$` is only checked once the line is complete
    ] {
        check(data, &[], None);
    }
}

#[test]
fn invalid_multibulk_length() {
    let e = Some(ProtocolError::InvalidMultibulkLength);
    for data in [
        &b"*\r\n"[..],
        b"*x\r\n",
        b"*+1\r\n",
        b"*01\r\n",
        b"*-0\r\n",
        b"*00\r\n",
        b"*1 \r\n",
        b"* 1\r\n",
        b"*2147483648\r\n",
        b"*3000000000\r\n",
        b"*123456789012345678901\r\n",
        b"*99999999999999999999\r\n",
    ] {
        check(data, &[], e.clone());
    }
    // Requests before the bad one are still delivered.
    check(b"PING\r\n*x\r\n", &[&[b"PING"]], e);
}

#[test]
fn invalid_bulk_length() {
    let e = Some(ProtocolError::InvalidBulkLength);
    // verified: `$-1`, `$+4`, `$04` refused.
    for data in [
        &b"*1\r\n$-1\r\n"[..],
        b"*1\r\n$+4\r\nPING\r\n",
        b"*1\r\n$04\r\nPING\r\n",
        b"*1\r\n$\r\n",
        b"*1\r\n$4x\r\n",
        b"*1\r\n$536870913\r\n",
        b"*1\r\n$9223372036854775808\r\n",
    ] {
        check(data, &[], e.clone());
    }
    let small = ParserLimits {
        max_bulk_len: 3,
        ..ParserLimits::default()
    };
    check_with(b"*1\r\n$3\r\nabc\r\n", &small, &[&[b"abc"]], None);
    check_with(b"*1\r\n$4\r\nabcd\r\n", &small, &[], e);
}

#[test]
fn expected_dollar() {
    // verified: nested arrays are refused.
    check(
        b"*1\r\n*1\r\n",
        &[],
        Some(ProtocolError::ExpectedDollar(b'*')),
    );
    check(
        b"*2\r\n$1\r\na\r\n:1\r\n",
        &[],
        Some(ProtocolError::ExpectedDollar(b':')),
    );
    // The line starts with the `\r` itself.
    check(
        b"*1\r\n\r\n",
        &[],
        Some(ProtocolError::ExpectedDollar(b'\r')),
    );
}

#[test]
fn expected_dollar_text() {
    // As a live Redis 7.0.15 sends them: CR and LF become spaces, other bytes are raw.
    assert_eq!(
        ProtocolError::ExpectedDollar(b'*').to_string(),
        "ERR Protocol error: expected '$', got '*'"
    );
    assert_eq!(
        ProtocolError::ExpectedDollar(b'\r').text_bytes(),
        b"ERR Protocol error: expected '$', got ' '"
    );
    assert_eq!(
        ProtocolError::ExpectedDollar(b'\n').to_string(),
        "ERR Protocol error: expected '$', got ' '"
    );
    assert_eq!(
        ProtocolError::ExpectedDollar(0xe9).text_bytes(),
        b"ERR Protocol error: expected '$', got '\xe9'"
    );
    assert_eq!(
        ProtocolError::ExpectedDollar(b'*')
            .to_cmd_error()
            .to_string(),
        "ERR Protocol error: expected '$', got '*'"
    );
}

#[test]
fn all_error_texts() {
    let cases = [
        (
            ProtocolError::InvalidMultibulkLength,
            "ERR Protocol error: invalid multibulk length",
        ),
        (
            ProtocolError::InvalidBulkLength,
            "ERR Protocol error: invalid bulk length",
        ),
        (
            ProtocolError::TooBigMbulkCount,
            "ERR Protocol error: too big mbulk count string",
        ),
        (
            ProtocolError::TooBigBulkCount,
            "ERR Protocol error: too big bulk count string",
        ),
        (
            ProtocolError::TooBigInline,
            "ERR Protocol error: too big inline request",
        ),
        (
            ProtocolError::UnbalancedQuotes,
            "ERR Protocol error: unbalanced quotes in request",
        ),
        (
            ProtocolError::UnauthenticatedMultibulkLength,
            "ERR Protocol error: unauthenticated multibulk length",
        ),
        (
            ProtocolError::UnauthenticatedBulkLength,
            "ERR Protocol error: unauthenticated bulk length",
        ),
    ];
    for (e, text) in cases {
        assert_eq!(e.to_string(), text);
        assert_eq!(e.text_bytes(), text.as_bytes());
        assert_eq!(e.to_cmd_error(), CmdError::Static(text));
        assert_eq!(CmdError::from(e).to_string(), text);
    }
}

#[test]
fn unauthenticated_limits() {
    let u = unauth();
    check_with(
        b"*11\r\n",
        &u,
        &[],
        Some(ProtocolError::UnauthenticatedMultibulkLength),
    );
    check_with(b"*10\r\n", &u, &[], None);
    check_with(
        b"*1\r\n$16385\r\n",
        &u,
        &[],
        Some(ProtocolError::UnauthenticatedBulkLength),
    );
    check_with(b"*1\r\n$16384\r\n", &u, &[], None);
    // Validity is checked before the authentication limits (verified).
    check_with(
        b"*1\r\n$600000000\r\n",
        &u,
        &[],
        Some(ProtocolError::InvalidBulkLength),
    );
    check_with(
        b"*2147483648\r\n",
        &u,
        &[],
        Some(ProtocolError::InvalidMultibulkLength),
    );
    // Negative counts are empty requests, not "above 10"; inline requests have no argument limit.
    check_with(b"*-11\r\nPING\r\n", &u, &[&[b"PING"]], None);
    let many = [&b"a"[..]; 20];
    check_with(
        b"a a a a a a a a a a a a a a a a a a a a\r\n",
        &u,
        &[&many],
        None,
    );
    // The same requests pass once authenticated.
    check(b"*11\r\n", &[], None);
    check(b"*1\r\n$16385\r\n", &[], None);
}

#[test]
fn a_nul_blocks_count_and_length_lines() {
    // On Redis 7.0.15 these all hang (strchr stops at the NUL), then fail once 64 KiB are buffered.
    check(b"*1\0\r\n$4\r\nPING\r\n", &[], None);
    check(b"*1\r\n$4\0\r\nPING\r\n", &[], None);
    check(b"*1\r\n\0\r\n", &[], None);
    let mut big = b"*1\0\r\n".to_vec();
    big.resize(INLINE_MAX_SIZE + 1, b'a');
    check(&big, &[], Some(ProtocolError::TooBigMbulkCount));
    let mut big = b"*1\r\n\0\r\n".to_vec();
    big.resize(INLINE_MAX_SIZE + 5, b'a');
    check(&big, &[], Some(ProtocolError::TooBigBulkCount));
    // A NUL in bulk data is just data.
    check(b"*1\r\n$4\r\nPI\0G\r\n", &[&[b"PI\0G"]], None);
}

#[test]
fn too_big_count_and_length_lines() {
    // `*` plus 65535 digits is 65536 bytes: still waiting. One more byte: too big.
    let mut line = b"*".to_vec();
    line.resize(INLINE_MAX_SIZE, b'1');
    assert_eq!(whole(&line, &ParserLimits::default()), (vec![], None));
    line.push(b'1');
    assert_eq!(
        whole(&line, &ParserLimits::default()),
        (vec![], Some(ProtocolError::TooBigMbulkCount))
    );

    let mut line = b"*1\r\n$".to_vec();
    line.resize(4 + INLINE_MAX_SIZE, b'1');
    assert_eq!(whole(&line, &ParserLimits::default()), (vec![], None));
    line.push(b'1');
    assert_eq!(
        whole(&line, &ParserLimits::default()),
        (vec![], Some(ProtocolError::TooBigBulkCount))
    );
    // Not starting with `$` gives the same error when no line end is found.
    let mut line = b"*1\r\nX".to_vec();
    line.resize(4 + INLINE_MAX_SIZE + 1, b'a');
    assert_eq!(
        whole(&line, &ParserLimits::default()),
        (vec![], Some(ProtocolError::TooBigBulkCount))
    );
    // A line end found first wins, however long the line: then the number is invalid (verified).
    let mut line = b"*1\r\n$".to_vec();
    line.resize(70_000, b'1');
    line.extend_from_slice(b"\r\n");
    assert_eq!(
        whole(&line, &ParserLimits::default()),
        (vec![], Some(ProtocolError::InvalidBulkLength))
    );
    // Arriving byte by byte, the same input hits the size limit first, as in Redis.
    assert_eq!(
        bytewise(&line, &ParserLimits::default()),
        (vec![], Some(ProtocolError::TooBigBulkCount))
    );
}

#[test]
fn long_numbers_take_the_general_path() {
    // The one-pass fast path reads at most 9 digits; longer valid numbers must still parse.
    let huge = ParserLimits {
        max_bulk_len: usize::MAX,
        ..ParserLimits::default()
    };
    check_with(b"*1\r\n$1000000000\r\n", &huge, &[], None);
    check(b"*1000000000\r\n$1\r\na\r\n", &[], None);
    check(
        b"*000000001\r\n",
        &[],
        Some(ProtocolError::InvalidMultibulkLength),
    );
    check(
        b"*1\r\n$999999999\r\n",
        &[],
        Some(ProtocolError::InvalidBulkLength),
    );
    check(b"*1\r\n$0\r\n\r\n", &[&[b""]], None);
}

#[test]
fn large_count_does_not_preallocate() {
    let mut p = RequestParser::new();
    let mut buf = BytesMut::from(&b"*2147483647\r\n$1\r\na\r\n"[..]);
    assert_eq!(p.next_request(&mut buf, &ParserLimits::default()), Ok(None));
    assert!(p.args.capacity() <= MAX_ARGV_PREALLOC);
    assert_eq!(p.args.len(), 1);
    assert!(buf.is_empty());
}

#[test]
fn large_bulk_grows_with_received_bytes() {
    let mut p = RequestParser::new();
    let mut buf = BytesMut::from(&b"*1\r\n$536870912\r\nabc"[..]);
    assert_eq!(p.next_request(&mut buf, &ParserLimits::default()), Ok(None));
    assert!(buf.capacity() <= 1 << 20, "capacity {}", buf.capacity());
    // Feed 4 MiB in 64 KiB pieces: capacity stays within a small multiple of what arrived.
    let piece = vec![b'x'; 64 * 1024];
    for _ in 0..64 {
        buf.extend_from_slice(&piece);
        assert_eq!(p.next_request(&mut buf, &ParserLimits::default()), Ok(None));
        assert!(buf.capacity() <= 4 * buf.len().max(1 << 18));
    }
}

#[test]
fn bulk_args_are_zero_copy() {
    let mut p = RequestParser::new();
    let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n"[..]);
    let base = buf.as_ptr() as usize;
    let req = p
        .next_request(&mut buf, &ParserLimits::default())
        .unwrap()
        .unwrap();
    assert_eq!(req[0].as_ptr() as usize, base + 8);
    assert_eq!(req[1].as_ptr() as usize, base + 17);
}

#[test]
fn state_is_kept_between_calls() {
    // A request split at every position parses the same; the parser holds it partially meanwhile.
    let data = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n";
    for cut in 0..=data.len() {
        let (r, e, left) = feed(&[&data[..cut], &data[cut..]], &ParserLimits::default());
        assert_eq!(r, vec![req(&[b"SET", b"key", b"value"])]);
        assert_eq!((e, left), (None, 0));
    }
    let mut p = RequestParser::new();
    let mut buf = BytesMut::from(&data[..24]);
    assert_eq!(p.next_request(&mut buf, &ParserLimits::default()), Ok(None));
    // The count line and two whole arguments were consumed already.
    assert_eq!(&buf[..], b"$5");
    assert!(!p.is_idle());
}

// ---------------------------------------------------------------------------------------------
// Inline
// ---------------------------------------------------------------------------------------------

#[test]
fn inline_basic() {
    check(b"PING\r\n", &[&[b"PING"]], None);
    check(b"PING\n", &[&[b"PING"]], None);
    check(
        b"SET k v\r\nGET k\n",
        &[&[b"SET", b"k", b"v"], &[b"GET", b"k"]],
        None,
    );
    check(b"  SET \t k   v  \r\n", &[&[b"SET", b"k", b"v"]], None);
    check(b"PING", &[], None);
    check(b"PING\r", &[], None);
    // Only the `\r` right before the `\n` is dropped; another `\r` separates arguments.
    check(b"ECHO a\rb\r\n", &[&[b"ECHO", b"a", b"b"]], None);
    check(b"ECHO\r\r\n", &[&[b"ECHO"]], None);
    // Bytes above 0x7f are ordinary.
    check(b"ECHO \xe9\xff\r\n", &[&[b"ECHO", b"\xe9\xff"]], None);
}

#[test]
fn blank_lines_are_skipped() {
    check(b"\r\n\r\nPING\r\n", &[&[b"PING"]], None);
    check(b"\nPING\n", &[&[b"PING"]], None);
    check(b"   \t\r\nPING\r\n", &[&[b"PING"]], None);
    check(b"\x0b\x0c\n", &[], None);
}

#[test]
fn vertical_tab_and_form_feed() {
    // Leading blanks are C isspace (includes \v \f); an unquoted token ends only at space/tab/CR/LF.
    check(b"\x0bPING\r\n", &[&[b"PING"]], None);
    check(b"PING\x0bX\r\n", &[&[b"PING\x0bX"]], None);
    // After a closing quote, \v counts as a blank (verified: two arguments).
    check(b"ECHO \"a\"\x0bb\r\n", &[&[b"ECHO", b"a", b"b"]], None);
}

#[test]
fn inline_quoting() {
    // verified examples
    check(b"SET \"a b\" 'c d'\r\n", &[&[b"SET", b"a b", b"c d"]], None);
    check(b"ECHO \"\\x41\\n\"\r\n", &[&[b"ECHO", b"A\n"]], None);
    check(
        b"ECHO \"x\"y\r\n",
        &[],
        Some(ProtocolError::UnbalancedQuotes),
    );
    // escapes in double quotes
    check(
        b"ECHO \"\\n\\r\\t\\b\\a\\\\\\\"\\z\\xff\\x0A\"\r\n",
        &[&[b"ECHO", b"\n\r\t\x08\x07\\\"z\xff\n"]],
        None,
    );
    check(b"ECHO \"\\xzz\"\r\n", &[&[b"ECHO", b"xzz"]], None);
    check(b"ECHO \"\\x4\"\r\n", &[&[b"ECHO", b"x4"]], None);
    // single quotes: only \' is an escape
    check(
        b"ECHO 'a\\'b\\n\"' c\r\n",
        &[&[b"ECHO", b"a'b\\n\"", b"c"]],
        None,
    );
    // a quote inside a token
    check(b"ECHO a\"b c\"\r\n", &[&[b"ECHO", b"ab c"]], None);
    check(b"ECHO a'b c' d\r\n", &[&[b"ECHO", b"ab c", b"d"]], None);
    // empty quoted arguments
    check(b"ECHO \"\" ''\r\n", &[&[b"ECHO", b"", b""]], None);
    // a quote ends the token it closes
    check(
        b"ECHO \"a\"\"b\"\r\n",
        &[],
        Some(ProtocolError::UnbalancedQuotes),
    );
    check(b"ECHO 'a'b\r\n", &[], Some(ProtocolError::UnbalancedQuotes));
    // never closed
    check(
        b"ECHO \"abc\r\n",
        &[],
        Some(ProtocolError::UnbalancedQuotes),
    );
    check(b"ECHO 'abc\r\n", &[], Some(ProtocolError::UnbalancedQuotes));
    check(
        b"ECHO \"a\\\r\n",
        &[],
        Some(ProtocolError::UnbalancedQuotes),
    );
    check(
        b"ECHO 'a\\'\r\n",
        &[],
        Some(ProtocolError::UnbalancedQuotes),
    );
    // the `\r` before `\n` is not part of the line, so a closing quote before it is fine
    check(b"ECHO 'a'\r\n", &[&[b"ECHO", b"a"]], None);
    // requests before the bad line are still delivered
    check(
        b"PING\nECHO \"\n",
        &[&[b"PING"]],
        Some(ProtocolError::UnbalancedQuotes),
    );
}

#[test]
fn a_nul_blocks_inline_lines() {
    // Redis 7.0.15 hangs on these, then answers "too big inline request" past 64 KiB.
    check(b"PING\0\r\nPING\r\n", &[], None);
    check(b"\0PING\r\n", &[], None);
    check(b"PING\r\nECHO a\0b\nPING\n", &[&[b"PING"]], None);
    let mut big = b"PING\0".to_vec();
    big.resize(70_000, b'a');
    big.push(b'\n');
    check(&big, &[], Some(ProtocolError::TooBigInline));
}

#[test]
fn too_big_inline() {
    let line = vec![b'a'; INLINE_MAX_SIZE];
    check(&line, &[], None);
    let line = vec![b'a'; INLINE_MAX_SIZE + 1];
    check(&line, &[], Some(ProtocolError::TooBigInline));
    // A complete long line is accepted when its `\n` arrives with it.
    let mut line = vec![b'a'; 70_000];
    line.push(b'\n');
    assert_eq!(
        whole(&line, &ParserLimits::default()),
        (vec![vec![vec![b'a'; 70_000]]], None)
    );
}

#[test]
fn mixed_inline_and_multibulk() {
    check(
        b"PING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nECHO 'x y'\n*0\r\n\r\n",
        &[&[b"PING"], &[b"ECHO", b"hi"], &[b"ECHO", b"x y"]],
        None,
    );
}

#[test]
fn split_args_helper() {
    assert_eq!(
        split_args(b"set \"a b\" c").unwrap(),
        vec![b"set".to_vec(), b"a b".to_vec(), b"c".to_vec()]
    );
    // As a C string, a NUL ends the line.
    assert_eq!(
        split_args(b"a b\0c d").unwrap(),
        vec![b"a".to_vec(), b"b".to_vec()]
    );
    assert_eq!(
        split_args(b"\"a\0\"").unwrap_err(),
        ProtocolError::UnbalancedQuotes
    );
    assert!(split_args(b"").unwrap().is_empty());
}

#[test]
fn strict_integers() {
    for (s, v) in [
        (&b"0"[..], Some(0)),
        (b"1", Some(1)),
        (b"-1", Some(-1)),
        (b"9223372036854775807", Some(i64::MAX)),
        (b"-9223372036854775808", Some(i64::MIN)),
        (b"9223372036854775808", None),
        (b"-9223372036854775809", None),
        (b"", None),
        (b"-", None),
        (b"-0", None),
        (b"00", None),
        (b"01", None),
        (b"+1", None),
        (b" 1", None),
        (b"1 ", None),
        (b"1.5", None),
        (b"1e3", None),
        (b"0x10", None),
        (b"000000000000000000001", None),
        (b"99999999999999999999", None),
    ] {
        assert_eq!(parse_strict_i64(s), v, "{s:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

fn encode_multibulk(reqs: &[Vec<Vec<u8>>]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in reqs {
        out.extend_from_slice(format!("*{}\r\n", r.len()).as_bytes());
        for a in r {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
    }
    out
}

/// Splits `data` at the given cut points (taken modulo its length).
fn split_at_points<'a>(data: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
    cuts.sort_unstable();
    let mut chunks = Vec::new();
    let mut prev = 0;
    for c in cuts {
        chunks.push(&data[prev..c]);
        prev = c;
    }
    chunks.push(&data[prev..]);
    chunks
}

/// Quotes arbitrary bytes so that `sdssplitargs` gives them back.
fn quote_inline(a: &[u8]) -> Vec<u8> {
    let mut q = b"\"".to_vec();
    for &b in a {
        match b {
            b'"' | b'\\' => q.extend_from_slice(&[b'\\', b]),
            0x21..=0x7e | b' ' => q.push(b),
            _ => q.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    q.push(b'"');
    q
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn multibulk_round_trip(
        reqs in prop::collection::vec(
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..6), 1..5),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let data = encode_multibulk(&reqs);
        let chunks = split_at_points(&data, &cuts);
        let (got, err, left) = feed(&chunks, &ParserLimits::default());
        prop_assert_eq!(err, None);
        prop_assert_eq!(left, 0);
        prop_assert_eq!(got, reqs);
    }

    #[test]
    fn inline_quoted_round_trip(
        args in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..20), 1..6),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let mut line = Vec::new();
        for a in &args {
            line.extend_from_slice(&quote_inline(a));
            line.push(b' ');
        }
        line.extend_from_slice(b"\r\n");
        let chunks = split_at_points(&line, &cuts);
        let (got, err, _) = feed(&chunks, &ParserLimits::default());
        prop_assert_eq!(err, None);
        prop_assert_eq!(got, vec![args]);
    }

    #[test]
    fn inline_plain_round_trip(
        words in prop::collection::vec("[a-zA-Z0-9:._-]{1,12}", 1..8),
        seps in prop::collection::vec("[ \t]{1,3}", 8),
    ) {
        let mut line = String::new();
        for (w, s) in words.iter().zip(&seps) {
            line.push_str(s);
            line.push_str(w);
        }
        line.push('\n');
        let (got, err) = whole(line.as_bytes(), &ParserLimits::default());
        prop_assert_eq!(err, None);
        let want: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        prop_assert_eq!(got, vec![want]);
    }

    /// Garbage never panics, and (below the 64 KiB thresholds) gives the same outcome however it is cut.
    #[test]
    fn garbage_is_chunking_independent(
        data in prop::collection::vec(
            prop_oneof![
                any::<u8>(),
                Just(b'*'), Just(b'$'), Just(b'\r'), Just(b'\n'), Just(b'"'), Just(b'\''),
                Just(b'\\'), Just(b' '), Just(b'0'), Just(b'1'), Just(b'2'), Just(b'-'),
            ],
            0..200),
        cuts in prop::collection::vec(any::<usize>(), 0..10),
        authenticated in any::<bool>(),
    ) {
        let limits = ParserLimits { max_bulk_len: 64, authenticated };
        let reference = whole(&data, &limits);
        let (got, err, _) = feed(&split_at_points(&data, &cuts), &limits);
        prop_assert_eq!((got, err), reference.clone());
        prop_assert_eq!(bytewise(&data, &limits), reference);
    }

    /// The one-pass path (`fast_request`) gives exactly what the general path gives, however the
    /// input is cut, for valid requests (including `$0` and long arguments) and for damaged ones.
    #[test]
    fn fast_path_agrees(
        reqs in prop::collection::vec(
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..24), 1..14), 1..6),
        damage in prop::collection::vec((any::<usize>(), any::<u8>()), 0..3),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
        authenticated in any::<bool>(),
        max_bulk_len in prop_oneof![Just(16usize), Just(DEFAULT_MAX_BULK_LEN)],
    ) {
        let mut data = encode_multibulk(&reqs);
        for (at, byte) in damage {
            let at = at % data.len();
            data[at] = byte;
        }
        let limits = ParserLimits { max_bulk_len, authenticated };
        let chunks = split_at_points(&data, &cuts);
        let general = feed_flat(&chunks, &limits, false);
        prop_assert_eq!(feed_flat(&chunks, &limits, true), general.clone());
        let (r, e, left) = feed(&chunks, &limits);
        prop_assert_eq!((r, e, left), general);
    }

    /// Structured garbage: mutated valid requests exercise deeper parser states.
    #[test]
    fn mutated_requests_never_panic(
        reqs in prop::collection::vec(
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..10), 1..4), 1..4),
        muts in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let mut data = encode_multibulk(&reqs);
        for (pos, b) in muts {
            let i = pos % data.len();
            data[i] = b;
        }
        let limits = ParserLimits::default();
        let reference = whole(&data, &limits);
        let (got, err, _) = feed(&split_at_points(&data, &cuts), &limits);
        prop_assert_eq!((got, err), reference);
    }
}
