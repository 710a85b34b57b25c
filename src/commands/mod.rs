//! Commands (floor 3): the one command table, the dispatcher, and one file per command family.
//! Uses `persistence`, `engine` (the shared state handlers see through [`Ctx`]), `store` and the
//! bottom floor; never `server`.
//!
//! Each family module exports `pub const COMMANDS: &[CommandSpec]`; [`FAMILIES`] lists them and is
//! the single declarative table from which dispatch, arity errors, `COMMAND`, `COMMAND INFO` and
//! `COMMAND DOCS` are all derived. Handlers are plain synchronous functions from arguments to a
//! [`Reply`] or a [`CmdError`]; they run with the keyspace lock held and never `.await`.
//!
//! The dispatcher alone checks, in Redis's order: unknown command, arity, authentication, then
//! transaction state (queue under MULTI), then deny-oom and MISCONF refusals; it also keeps the
//! per-command statistics and converts a panicking handler into an error reply so one bad command
//! never takes the server down.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::config::{ConfigError, Rename};
use crate::engine::pubsub::PubSub;
use crate::engine::repl::ReplState;
pub use crate::engine::{now_ms, CommandStat, Engine};
use crate::engine::{ClientHandle, Shared, WriteStream};
use crate::error::{self, CmdError};
use crate::protocol::Reply;
pub use crate::store::db::PREFETCH_BATCH;
use crate::store::db::{Db, ItemHash, PrefetchedItem, SharedDb, Store};
use crate::store::value::Value;

pub mod args;
pub mod bloom;
pub mod client;
pub mod cms;
pub mod command_docs;
pub mod command_info;
pub mod config;
pub mod cuckoo;
pub mod debug;
pub mod hll;
pub mod info;
pub mod introspection;
pub mod keyspace;
pub mod persistence;
pub mod pubsub;
pub mod replication;
pub mod server;
pub mod shared_path;
pub mod strings;
pub mod tdigest;
pub mod topk;
pub mod transactions;

pub use args::Args;

// ---------------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------------

/// Command flags, as `COMMAND INFO` names them.
pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const MODULE: u32 = 1 << 3;
    pub const ADMIN: u32 = 1 << 4;
    pub const PUBSUB: u32 = 1 << 5;
    pub const NOSCRIPT: u32 = 1 << 6;
    pub const BLOCKING: u32 = 1 << 7;
    pub const LOADING: u32 = 1 << 8;
    pub const STALE: u32 = 1 << 9;
    pub const SKIP_MONITOR: u32 = 1 << 10;
    pub const SKIP_SLOWLOG: u32 = 1 << 11;
    pub const FAST: u32 = 1 << 12;
    pub const NOAUTH: u32 = 1 << 13;
    pub const MAY_REPLICATE: u32 = 1 << 14;
    pub const NO_MULTI: u32 = 1 << 15;
    pub const ALLOW_BUSY: u32 = 1 << 16;
    /// Redis's CMD_PROTECTED (DEBUG, MODULE LOAD/LOADEX/UNLOAD): allowed only as the
    /// `enable-debug-command` / `enable-module-command` setting says. Not listed by COMMAND INFO
    /// (Redis does not list it either).
    pub const PROTECTED: u32 = 1 << 17;
    /// Redis's CMD_NO_ASYNC_LOADING: refused while a replica loads its primary's snapshot
    /// asynchronously (`repl-diskless-load swapdb`), which hyperbloom never does (it loads before
    /// it serves). Listed by COMMAND INFO only.
    pub const NO_ASYNC_LOADING: u32 = 1 << 18;

    /// Names in the order Redis lists them.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (MODULE, "module"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (FAST, "fast"),
        (NOAUTH, "no_auth"),
        // MAY_REPLICATE is not listed: Redis 7.0.15 lists it for no command.
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// Result type of every command handler: the reply, or the error reply Redis would send.
pub type CmdResult = Result<Reply, CmdError>;

pub type Handler = fn(&mut Ctx, &[Bytes]) -> CmdResult;

/// A command name's table entry: its index and spec, or `None` for an unknown name.
pub type Lookup = Option<(usize, &'static CommandSpec)>;

/// A command's handler for the shared keyspace lock ([`shared_path`]): it sees only its
/// database, with its keys' stripes held. A read-only command's [`Handler`] and this one share
/// one implementation over [`ReadView`](crate::store::db::ReadView); a write's writes values in
/// place through [`SharedDb::write`](crate::store::db::SharedDb::write) and defers whatever
/// else.
pub type SharedHandler = fn(&mut SharedDb, &[Bytes]) -> CmdResult;

/// One command (or subcommand) as registered.
pub struct CommandSpec {
    /// Lower-case registered name; `container|sub` for subcommands.
    pub name: &'static str,
    /// Redis convention: N = exactly N arguments including the name; -N = at least N.
    pub arity: i32,
    pub flags: u32,
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    pub group: &'static str,
    pub since: &'static str,
    pub summary: &'static str,
    pub handler: Handler,
    /// Subcommands of a container command (CLIENT, CONFIG, ...). Empty for plain commands.
    pub subcommands: &'static [CommandSpec],
    /// The handler for the shared keyspace lock, for the few commands that have one: it holds
    /// its keys' stripes for writing if the command has the `WRITE` flag, else for reading.
    pub shared: Option<SharedHandler>,
    /// The shared handler is used only while more than one thread runs batches
    /// ([`Shared::parallel_batches`](crate::engine::Shared::parallel_batches)): on one thread
    /// it costs more than the exclusive path and has no other core to gain (MSET: a stripe
    /// lock and a check per key).
    pub shared_parallel_only: bool,
}

impl CommandSpec {
    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity;
        if a >= 0 {
            argc == a as usize
        } else {
            argc >= (-a) as usize
        }
    }

    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// This read-only command with a handler for the shared keyspace lock (see
    /// [`shared_path`]).
    pub const fn shared_read(mut self, handler: SharedHandler) -> CommandSpec {
        assert!(
            self.flags & flags::WRITE == 0,
            "a write's shared handler is shared_write"
        );
        self.shared = Some(handler);
        self
    }

    /// This write command with a handler for the shared keyspace lock, writing in place.
    pub const fn shared_write(mut self, handler: SharedHandler) -> CommandSpec {
        assert!(
            self.flags & flags::WRITE != 0,
            "a read's shared handler is shared_read"
        );
        self.shared = Some(handler);
        self
    }

    /// This write command with a handler for the shared keyspace lock used only while batches
    /// run on more than one thread (`shared_parallel_only`).
    pub const fn shared_write_parallel(self, handler: SharedHandler) -> CommandSpec {
        let mut spec = self.shared_write(handler);
        spec.shared_parallel_only = true;
        spec
    }

    /// Whether the shared handler applies now (`parallel`: batches run on more than one thread).
    #[inline]
    pub fn shared_handler(&self, parallel: bool) -> Option<SharedHandler> {
        self.shared
            .filter(|_| parallel || !self.shared_parallel_only)
    }

    /// The keys of `argv` per the key positions.
    pub fn keys<'a>(&self, argv: &'a [Bytes]) -> Vec<&'a Bytes> {
        self.key_iter(argv).collect()
    }

    /// [`CommandSpec::keys`] without collecting them.
    pub fn key_iter<'a>(&self, argv: &'a [Bytes]) -> impl Iterator<Item = &'a Bytes> {
        let first = self.first_key.max(0) as usize;
        let last = if self.last_key < 0 {
            argv.len() as i32 + self.last_key
        } else {
            self.last_key
        };
        let end = if self.first_key <= 0 || last < 0 {
            0
        } else {
            (last as usize + 1).min(argv.len())
        };
        let step = self.step.max(1) as usize;
        argv.get(first.min(end)..end)
            .unwrap_or_default()
            .iter()
            .step_by(step)
    }
}

/// Every family's commands. Adding a family = adding one line here.
pub static FAMILIES: &[&[CommandSpec]] = &[
    server::COMMANDS,
    transactions::COMMANDS,
    keyspace::COMMANDS,
    strings::COMMANDS,
    hll::COMMANDS,
    bloom::COMMANDS,
    cuckoo::COMMANDS,
    tdigest::COMMANDS,
    cms::COMMANDS,
    topk::COMMANDS,
    persistence::COMMANDS,
    pubsub::COMMANDS,
    replication::COMMANDS,
];

/// Index over [`FAMILIES`] by name, built once.
///
/// Looked up once per request, so it is a perfect hash rather than a hash map: a name is read as
/// two little-endian words, its first and its last eight bytes (overlapping below 16 bytes, the
/// whole name zero-padded below 8), case-folded by `| 0x20` for the slot, and multiplied by a
/// seed that the build picks so that no two commands share a slot. A lookup is then two loads,
/// one multiply and one candidate. Clients send a name in one case, nearly always all upper or all
/// lower, so each command keeps both spellings as words and a name of up to 16 bytes is matched
/// by comparing words; only a mixed-case or longer name takes the byte-by-byte case-folding
/// compare. (Issue 15: the bucket array this replaced chained names by length and first and last
/// letter, so `PFCOUNT` was first compared with `PERSIST` and `GET` with `EXEC`, at two `memcmp`s
/// and a folding compare each: ~140 of a ~3,750-instruction `-P 1` PFCOUNT.)
pub struct CommandTable {
    /// `slots[slot]` is 1 + the index in `all` of the one command in that slot, 0 when empty.
    slots: Box<[u16]>,
    /// The slot's shift (64 - log2 of the slot count) and multiplier.
    shift: u32,
    seed: u64,
    all: Vec<&'static CommandSpec>,
    /// Per command (as `all`): the name it is found by, its own unless `rename-command` gave it
    /// another, empty when `rename-command` removed it (then it is in no slot).
    names: Vec<Box<str>>,
    /// Per command (as `all`): that name's words in upper and in lower case.
    words: Vec<[(u64, u64); 2]>,
}

/// Longest name the table can hold. The registered ones are well below; a `rename-command`
/// name is often a long random string (a hex digest of 40 or 64 characters).
const MAX_NAME: usize = 256;

/// A name's first and last eight bytes as little-endian words; for names shorter than 8 bytes
/// both are the whole name, zero-padded. With the length, they are the whole name up to 16 bytes.
#[inline]
fn name_words(name: &[u8]) -> (u64, u64) {
    let n = name.len();
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&name[at..at + 8]);
        u64::from_le_bytes(w)
    };
    if n >= 8 {
        (word(0), word(n - 8))
    } else if n >= 4 {
        let half = |at: usize| {
            let mut w = [0u8; 4];
            w.copy_from_slice(&name[at..at + 4]);
            u64::from(u32::from_le_bytes(w))
        };
        // The two halves overlap by 8 - n bytes, which hold the same bits in both.
        let w = half(0) | half(n - 4) << ((n - 4) * 8);
        (w, w)
    } else if n > 0 {
        let w = u64::from(name[0])
            | u64::from(name[n / 2]) << (n / 2 * 8)
            | u64::from(name[n - 1]) << ((n - 1) * 8);
        (w, w)
    } else {
        (0, 0)
    }
}

/// The case-folded key a slot is computed from (`| 0x20` on every byte: letters fold, and the
/// few other bytes that fold onto something else are told apart by the exact compare).
#[inline]
fn folded_key(words: (u64, u64), len: usize) -> u64 {
    const FOLD: u64 = 0x2020_2020_2020_2020;
    (words.0 | FOLD) ^ (words.1 | FOLD).rotate_left(29) ^ len as u64
}

impl CommandTable {
    /// The table of every registered command, with `renames` applied in order as Redis applies
    /// `rename-command OLD NEW` lines: OLD must be a command (by its current name), an empty NEW
    /// removes it, and NEW may not be another command's name. The error is Redis's text.
    fn build(renames: &[Rename]) -> Result<CommandTable, ConfigError> {
        let all: Vec<&'static CommandSpec> = FAMILIES.iter().flat_map(|f| f.iter()).collect();
        let mut names: Vec<Box<str>> = all.iter().map(|spec| Box::from(spec.name)).collect();
        for rename in renames {
            let (old, new) = (&rename.old, &rename.new);
            let found = |name: &str, names: &[Box<str>]| {
                names
                    .iter()
                    .position(|n| !n.is_empty() && n.eq_ignore_ascii_case(name))
            };
            let Some(at) = found(old, &names) else {
                return Err(rename.fatal("No such command in rename-command"));
            };
            names[at] = Box::from("");
            if !new.is_empty() {
                if found(new, &names).is_some() {
                    return Err(rename.fatal("Target command name already exists"));
                }
                if new.len() > MAX_NAME || new.contains('|') {
                    return Err(rename.fatal(&format!(
                        "Target command name longer than {MAX_NAME} bytes or with a '|'"
                    )));
                }
                names[at] = Box::from(new.as_str());
            }
        }
        let words: Vec<[(u64, u64); 2]> = names
            .iter()
            .map(|name| {
                debug_assert!(name.len() <= MAX_NAME && !name.contains('|'));
                let upper = name.to_ascii_uppercase();
                let lower = name.to_ascii_lowercase();
                [name_words(upper.as_bytes()), name_words(lower.as_bytes())]
            })
            .collect();
        let keys: Vec<Option<u64>> = names
            .iter()
            .zip(&words)
            .map(|(name, w)| (!name.is_empty()).then(|| folded_key(w[1], name.len())))
            .collect();
        // Seeds from a fixed sequence, so the layout is the same on every start; 2^13 slots for
        // ~150 names take a few tries, and a larger table is the fallback.
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for bits in 13..=20u32 {
            let shift = 64 - bits;
            for _ in 0..4096 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407)
                    | 1;
                let mut slots = vec![0u16; 1 << bits].into_boxed_slice();
                let placed = keys.iter().enumerate().all(|(i, key)| {
                    let Some(key) = key else {
                        return true;
                    };
                    let slot = &mut slots[(key.wrapping_mul(seed) >> shift) as usize];
                    let free = *slot == 0;
                    *slot = u16::try_from(i + 1).expect("fewer than 65535 commands");
                    free
                });
                if placed {
                    return Ok(CommandTable {
                        slots,
                        shift,
                        seed,
                        all,
                        names,
                        words,
                    });
                }
            }
        }
        panic!("two command names fold to the same key: the table cannot separate them");
    }

    /// Looks up a command by name, ignoring ASCII case, without allocating.
    #[inline]
    pub fn get(&self, name: &[u8]) -> Option<(usize, &'static CommandSpec)> {
        if name.len() > MAX_NAME {
            return None;
        }
        let words = name_words(name);
        let key = folded_key(words, name.len());
        let index = usize::from(self.slots[(key.wrapping_mul(self.seed) >> self.shift) as usize])
            .checked_sub(1)?;
        let spec = self.all[index];
        let own = &self.names[index];
        let [upper, lower] = self.words[index];
        let same = own.len() == name.len()
            && if name.len() <= 16 && (words == upper || words == lower) {
                true
            } else {
                own.as_bytes().eq_ignore_ascii_case(name)
            };
        same.then_some((index, spec))
    }

    pub fn all(&self) -> &[&'static CommandSpec] {
        &self.all
    }

    /// The commands a client can call: all but those `rename-command` removed (COMMAND, COMMAND
    /// COUNT, LIST and DOCS show these, as Redis's show its command dictionary).
    pub fn listed(&self) -> impl Iterator<Item = &'static CommandSpec> + '_ {
        self.all
            .iter()
            .zip(&self.names)
            .filter(|(_, name)| !name.is_empty())
            .map(|(spec, _)| *spec)
    }

    pub fn len(&self) -> usize {
        self.all.len()
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }
}

pub fn table() -> &'static CommandTable {
    TABLE.get_or_init(|| CommandTable::build(&[]).expect("no renames, no error"))
}

/// The process's command table, built once: with the configuration's `rename-command`s when
/// the server binary installs them ([`install_renames`]) before anything looks a command up.
static TABLE: OnceLock<CommandTable> = OnceLock::new();

/// Applies `rename-command` (Redis reads it from the configuration only, at startup): builds
/// the table with the renames. Redis's error text when a rename is impossible; an error too if
/// the table was already in use (an in-process server beside others, as the tests run them).
pub fn install_renames(renames: &[Rename]) -> Result<(), ConfigError> {
    if renames.is_empty() {
        return Ok(());
    }
    let built = CommandTable::build(renames)?;
    TABLE.set(built).map_err(|_| {
        ConfigError(
            "rename-command needs a process of its own (the command table is in use)".into(),
        )
    })
}

/// The subcommand `sub` (any case) of a container command.
pub fn find_subcommand(spec: &'static CommandSpec, sub: &[u8]) -> Option<&'static CommandSpec> {
    subcommand_position(spec, sub).map(|i| &spec.subcommands[i])
}

/// A container's HELP reply: its lines as status replies, as Redis's `addReplyHelp` sends them.
pub(crate) fn help_reply(lines: &'static [&'static str]) -> CmdResult {
    Ok(Reply::Array(
        lines.iter().map(|l| Reply::Status(l)).collect(),
    ))
}

/// The position of the subcommand `sub` (any case) among a container's subcommands.
fn subcommand_position(spec: &CommandSpec, sub: &[u8]) -> Option<usize> {
    spec.subcommands.iter().position(|s| {
        s.name
            .split_once('|')
            .is_some_and(|(_, n)| n.as_bytes().eq_ignore_ascii_case(sub))
    })
}

/// Where a subcommand's position sits in a [`ClientHandle::last_cmd`] code: above every command
/// index, as the table holds fewer than 65535 commands (`CommandTable::build` checks it).
const LAST_SUBCOMMAND_SHIFT: u32 = 16;

/// The [`ClientHandle::last_cmd`] code of the command at `index` in the table, or of the
/// subcommand at position `sub` of that container. A plain command's code is `index + 1`, so
/// recording it costs what it did before subcommands were recorded.
#[inline]
pub fn last_command_code(index: usize, sub: Option<usize>) -> usize {
    index + 1 + sub.map_or(0, |s| (s + 1) << LAST_SUBCOMMAND_SHIFT)
}

/// CLIENT LIST's `cmd=` for a [`ClientHandle::last_cmd`] code: the name as registered
/// (`client|list` for a subcommand, Redis's `fullname`), `NULL` for none.
pub fn last_command_name(code: usize) -> &'static str {
    let index = (code & ((1 << LAST_SUBCOMMAND_SHIFT) - 1)).checked_sub(1);
    let Some(spec) = index.and_then(|i| table().all().get(i)) else {
        return "NULL";
    };
    match (code >> LAST_SUBCOMMAND_SHIFT).checked_sub(1) {
        None => spec.name,
        Some(position) => spec.subcommands.get(position).map_or("NULL", |s| s.name),
    }
}

/// Resolves a container's subcommand from `argv[1]` up front, as Redis's lookupCommand does, and
/// records it as the client's last command (CLIENT LIST `cmd=client|list`). Without a second
/// argument the container itself is the command (its code is already recorded); an unknown
/// subcommand is recorded as none (`cmd=NULL`, as Redis's lastcmd is then NULL). Gives what
/// runs: the subcommand, or the container when there is none (an unknown one is refused when
/// `execute` resolves it). Containers are never on the hot path, so plain commands pay only the
/// test that sends a container here.
#[cold]
#[inline(never)]
fn record_subcommand(
    handle: &ClientHandle,
    index: usize,
    spec: &'static CommandSpec,
    argv: &[Bytes],
) -> &'static CommandSpec {
    let Some(name) = argv.get(1) else {
        return spec;
    };
    let position = subcommand_position(spec, name);
    handle.last_cmd.store(
        position.map_or(0, |p| last_command_code(index, Some(p))),
        Ordering::Relaxed,
    );
    position.map_or(spec, |p| &spec.subcommands[p])
}

/// Finds the subcommand of a container; the errors Redis gives when it is missing.
pub fn subcommand(
    spec: &'static CommandSpec,
    argv: &[Bytes],
) -> Result<&'static CommandSpec, CmdError> {
    let sub = &argv[1];
    match find_subcommand(spec, sub) {
        Some(s) if s.arity_ok(argv.len()) => Ok(s),
        Some(s) => Err(CmdError::arity(s.name)),
        None => Err(CmdError::unknown_subcommand(sub, spec.name)),
    }
}

/// Whether running `argv` may write or replicate: what a CLIENT PAUSE WRITE holds back (Redis's
/// `is_may_replicate_command`: the command's, or its subcommand's, `write` or `may_replicate`
/// flag; for EXEC, any queued command's). An unknown command does not.
pub fn may_write(client: &ClientState, argv: &[Bytes]) -> bool {
    let Some((_, spec)) = argv.first().and_then(|n| table().get(n)) else {
        return false;
    };
    let writes = flags::WRITE | flags::MAY_REPLICATE;
    if spec.name == "exec" {
        return client
            .multi
            .as_ref()
            .is_some_and(|queue| queue.iter().any(|q| table().all()[q.index].has(writes)));
    }
    let spec = if spec.subcommands.is_empty() || argv.len() < 2 {
        spec
    } else {
        find_subcommand(spec, &argv[1]).unwrap_or(spec)
    };
    spec.has(writes)
}

// ---------------------------------------------------------------------------------------------
// Per-client state and the handler context
// ---------------------------------------------------------------------------------------------

/// Something the connection loop must do after the reply is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// QUIT: close after flushing.
    Close,
    /// SHUTDOWN: the handler already saved (if it had to); stop the server.
    Shutdown,
    /// PSYNC/SYNC: the connection becomes a replica link (`server::replica`).
    Replicate { replid: Bytes, offset: Bytes },
    /// WAIT: reply with the number of replicas that acknowledged `offset`, once `numreplicas` did
    /// or `timeout_ms` passed (0 = no timeout).
    Wait {
        numreplicas: usize,
        timeout_ms: u64,
        offset: u64,
    },
}

/// CLIENT REPLY's state, Redis's `CLIENT_REPLY_OFF`, `CLIENT_REPLY_SKIP_NEXT` and
/// `CLIENT_REPLY_SKIP` flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    /// CLIENT REPLY OFF: no reply until CLIENT REPLY ON.
    Off,
    /// CLIENT REPLY SKIP was the command just run: the next one's reply is dropped.
    SkipNext,
    /// The reply of the command running now is dropped.
    Skip,
}

impl ReplyMode {
    /// Whether the reply of the command that just ran is dropped.
    #[inline]
    pub fn silences(self) -> bool {
        matches!(self, ReplyMode::Off | ReplyMode::Skip)
    }

    /// After a command's reply (Redis's `commandProcessed`): a skip ends, and a SKIP just run
    /// starts one for the next command.
    #[inline]
    pub fn after_command(self) -> ReplyMode {
        match self {
            ReplyMode::Skip => ReplyMode::On,
            ReplyMode::SkipNext => ReplyMode::Skip,
            other => other,
        }
    }
}

/// What one connection's commands can see and change about that connection.
pub struct ClientState {
    pub handle: Arc<ClientHandle>,
    pub db: usize,
    pub proto: u8,
    pub authenticated: bool,
    /// Commands queued by MULTI; None when not in a transaction.
    pub multi: Option<Vec<transactions::Queued>>,
    /// A queued command was refused: EXEC must abort.
    pub multi_error: bool,
    /// WATCHed keys: (db, key, version at WATCH, key was already expired at WATCH).
    pub watches: Vec<(usize, Bytes, u64, bool)>,
    pub action: Option<Action>,
    /// EXEC is running this client's queued commands (Redis's DENY_BLOCKING while in MULTI).
    pub in_exec: bool,
    /// This connection applies our primary's replication stream: it may write on a read-only
    /// replica, and what it executes is not propagated again (its bytes are forwarded verbatim).
    pub is_master: bool,
    /// What REPLCONF said before PSYNC.
    pub replconf: crate::engine::repl::ReplConf,
    /// The AOF loader's client: EXEC skips the server-state refusals (loading, MISCONF).
    pub replaying: bool,
    /// The client ran MONITOR.
    pub monitor: bool,
    /// Bytes the connection writes right after the current reply (a monitor's own MONITOR line).
    pub after_reply: bytes::BytesMut,
    /// Set by the connection for a batch: when the previous command of the batch ended (or the
    /// batch began), which is when the next one starts for INFO commandstats. One clock read
    /// per command instead of two (issue 15: ~110 instructions of a pipelined command); the time
    /// between two commands of a batch (appending the reply, ~0.1 µs) counts towards the second.
    /// In [`crate::engine::mono_ns`] nanoseconds.
    pub cmd_clock: Option<u64>,
    /// CLIENT REPLY: whether replies reach this client (pushes always do, as in Redis 7).
    pub reply_mode: ReplyMode,
    /// Read lookups of the shared path that hit and missed, added to INFO's totals after the
    /// batch (`Stats::keyspace_hits`), so that no core writes a shared line per read.
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    /// The BF.EXISTS items of the current stretch of a batch whose probes [`prefetch_keys`]
    /// prefetched, so the command does not prefetch them again.
    pub prefetched: PrefetchedItems,
    /// Batches starting with a write that still go straight to the exclusive lock, because a
    /// recent shared-path write of this client deferred (`shared_path`: a new key, a replica,
    /// ...); a deferral costs a lock round trip, so a client whose writes keep deferring tries
    /// the shared path once every [`shared_path::WRITE_BACKOFF`] + 1 batches.
    pub shared_write_backoff: u8,
    /// A shared-path write's command, encoded for the write stream before its mutex is taken
    /// (`shared_path`), reused.
    pub stream_scratch: Vec<u8>,
    /// Where a shared-path write that creates a filter encodes the `BF.RESERVE`/`CF.RESERVE`
    /// that precedes it in the write stream (`store::db::SharedDb::propagate_before`).
    pub prelude_scratch: Vec<u8>,
    /// Where a shared-path write encodes the command it propagates as instead of its own
    /// (`store::db::SharedDb::propagate_as`).
    pub rewrite_scratch: Vec<u8>,
    /// A shared-path write of the current batch entered the replication stream: the connection
    /// wakes the replica tasks once the batch is done (`shared_path`).
    pub fed_replicas: bool,
}

/// Arguments [`prefetch_keys`] hashed and prefetched (at most [`PREFETCH_BATCH`]), with their
/// hashes, for the commands of its stretch of the batch
/// ([`crate::store::db::ReadView::batch_hash`]). An entry must never outlive its argument: the
/// connection empties the list when a batch starts, and [`prefetch_keys`] when it starts (see
/// [`PrefetchedItem`] for why an address then identifies the argument).
#[derive(Debug)]
pub struct PrefetchedItems {
    items: [PrefetchedItem; PREFETCH_BATCH],
    len: usize,
}

impl Default for PrefetchedItems {
    fn default() -> Self {
        PrefetchedItems {
            items: [PrefetchedItem::NONE; PREFETCH_BATCH],
            len: 0,
        }
    }
}

impl PrefetchedItems {
    pub fn items(&self) -> &[PrefetchedItem] {
        &self.items[..self.len]
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }

    fn push(&mut self, item: &[u8], hash: ItemHash) {
        if let Some(slot) = self.items.get_mut(self.len) {
            *slot = PrefetchedItem::new(item, hash);
            self.len += 1;
        }
    }
}

impl ClientState {
    pub fn new(handle: Arc<ClientHandle>, authenticated: bool) -> ClientState {
        ClientState {
            handle,
            db: 0,
            proto: 2,
            authenticated,
            multi: None,
            multi_error: false,
            watches: Vec::new(),
            action: None,
            in_exec: false,
            is_master: false,
            replconf: Default::default(),
            replaying: false,
            monitor: false,
            after_reply: bytes::BytesMut::new(),
            cmd_clock: None,
            reply_mode: ReplyMode::On,
            keyspace_hits: 0,
            keyspace_misses: 0,
            prefetched: PrefetchedItems::default(),
            shared_write_backoff: 0,
            stream_scratch: Vec::new(),
            prelude_scratch: Vec::new(),
            rewrite_scratch: Vec::new(),
            fed_replicas: false,
        }
    }

    /// Drops every WATCH of this client.
    pub fn unwatch_all(&mut self, store: &mut Store) {
        for (db, key, _, _) in self.watches.drain(..) {
            if let Some(d) = store.dbs.get_mut(db) {
                d.unwatch(&key);
            }
        }
    }
}

/// What a handler works with.
pub struct Ctx<'a> {
    pub store: &'a mut Store,
    /// Every client's subscriptions, and delivery to them.
    pub pubsub: &'a mut PubSub,
    pub client: &'a mut ClientState,
    pub shared: &'a Shared,
    /// The time of this command, unix ms (Redis caches it per command).
    pub now_ms: u64,
    pub stats: &'a mut Vec<CommandStat>,
    /// The shared-lock path's counts; read `stats` through [`Ctx::command_stats`], which adds
    /// them in.
    pub shared_stats: &'a [crate::engine::SharedStat],
    pub error_stats: &'a mut HashMap<String, u64>,
    /// Replication state (ids, offset, backlog, replicas, our primary).
    pub repl: &'a mut crate::engine::repl::ReplState,
    /// The write stream ([`crate::engine::propagate`]); handlers reach it through the
    /// `propagate_*` methods.
    pub stream: &'a mut WriteStream,
    /// The engine's shut-down mark (SHUTDOWN sets it through `persistence::shut_down`).
    pub shut_down: &'a mut bool,
}

impl Ctx<'_> {
    /// `maxmemory` now (its hot-path mirror, read without the config lock), for the checks that
    /// creating a filter or sketch does against what it reserves; 0 (no limit) on a replica,
    /// which ignores `maxmemory` as Redis's does by default (`replica-ignore-maxmemory`).
    pub fn maxmemory(&self) -> u64 {
        if self.repl.master.is_some() {
            return 0;
        }
        self.shared.maxmemory.load(Ordering::Relaxed)
    }

    /// INFO commandstats' counts, the shared-lock path's included.
    pub fn command_stats(&mut self) -> &mut [CommandStat] {
        crate::engine::fold_shared_stats(self.stats, self.shared_stats);
        self.stats
    }

    /// The selected database, with its clock set to this command's time.
    pub fn db(&mut self) -> &mut Db {
        self.store.db(self.client.db, self.now_ms)
    }

    /// A database by index, with its clock set.
    pub fn db_at(&mut self, index: usize) -> &mut Db {
        self.store.db(index, self.now_ms)
    }

    /// Raises a keyspace event for `key` in the selected database (published after the command,
    /// if `notify-keyspace-events` enables `class`). The hook for every command family: Redis core
    /// commands name their event (`set`, `del`, `expire`...); the store itself raises `new`,
    /// `expired` and `keymiss`.
    pub fn notify(&mut self, class: u32, event: &'static str, key: &[u8]) {
        let db = self.client.db;
        self.store.dbs[db].notify(class, event, key);
    }

    /// Protocol of this connection: 2 or 3.
    pub fn proto(&self) -> u8 {
        self.client.proto
    }

    /// The configuration (a read lock held for the guard's lifetime).
    pub fn config(&self) -> std::sync::RwLockReadGuard<'_, crate::config::Config> {
        self.shared.config()
    }

    /// True when someone consumes the write stream: handlers build rewritten argvs only then.
    pub fn propagating(&self) -> bool {
        self.stream.is_active()
    }

    /// Propagate `argv` instead of the command as received (Redis's `rewriteClientCommandVector`);
    /// it is still written only if the command changed the keyspace.
    pub fn propagate_as(&mut self, argv: Vec<Bytes>) {
        if self.stream.is_active() {
            self.stream.command.argv = Some(argv);
        }
    }

    /// Propagate the command even though the keyspace did not change (Redis's
    /// `forceCommandPropagation`, e.g. FLUSHALL of nothing; a module's
    /// `RedisModule_ReplicateVerbatim`, the only way a BF/CF command is propagated).
    pub fn force_propagation(&mut self) {
        self.stream.command.force = true;
    }

    /// Propagate nothing for this command itself (Redis's `preventCommandPropagation`).
    pub fn propagate_nothing(&mut self) {
        self.stream.command.prevent = true;
    }

    /// Adds a command to propagate now, before this command's own (Redis's `alsoPropagate`);
    /// deletions by expiry found so far go first, as they happened first.
    pub fn also_propagate<A: AsRef<[u8]>>(&mut self, db: usize, argv: &[A]) {
        if self.stream.is_active() {
            crate::engine::push_expired(self.store, self.stream);
            self.stream.push(db, argv);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The dispatcher
// ---------------------------------------------------------------------------------------------

/// Runs one request and returns its reply. `engine` is the locked keyspace; `now_ms` is the time
/// the connection read the batch (one clock read per batch: reading the clock per command cost ~10 %
/// of the CPU of a pipelined SET in profiles, and expiry needs no finer grain than a batch).
/// Prefetches the keys of the next requests of a pipelined batch (up to
/// [`crate::store::db::PREFETCH_BATCH`]) in the client's database, so that their lookups' cache
/// misses overlap instead of coming one command at a time ([`Db::prefetch`]). Takes each
/// request's first argument as its key, which it is for every single-key command; for any other
/// command it is a wasted hint, never a change in what runs.
///
/// Then, for `CF.*` requests of one key and one item (CF.ADD, CF.EXISTS...) and BF.EXISTS, it
/// starts the misses of the item's probes in the filter, which is where those
/// commands wait on a filter bigger than the caches (`ScalingBloom::prefetch_item`,
/// `CuckooFilter::prefetch_item`).
pub fn prefetch_keys<'a>(
    shared: &Shared,
    lock: &shared_path::EngineLock,
    client: &mut ClientState,
    batch: impl Iterator<Item = &'a [Bytes]> + Clone,
) {
    let engine = lock.engine();
    client.prefetched.clear();
    let Some(db) = engine.store.dbs.get(client.db) else {
        return;
    };
    db.prefetch(
        batch
            .clone()
            .filter_map(|argv| argv.get(1))
            .map(|key| &key[..]),
        // Under the exclusive lock, or with one thread running batches, nothing can change a
        // segment beside the walks.
        (lock.is_shared()
            && engine.store.shared_inserts
            && shared.parallel_batches.load(Ordering::Relaxed))
        .then_some(&engine.store.stripes),
    );
    // A pipeline mostly hits one filter: its lookup is reused while the key repeats (a lookup
    // per request was ~100 of a pipelined CF.ADD's ~3,000 instructions, filter big or small).
    // Under the shared lock a command may be writing that filter in place (a cuckoo filter
    // growing moves its sub-filter list), so the key's stripe is held for reading while its
    // value is looked at, as a shared read would (`store::db::Stripes`).
    let mut last: Option<(&[u8], Option<&Value>)> = None;
    let mut stripe: Option<(usize, crate::store::db::StripeRead<'_>)> = None;
    for argv in batch.take(crate::store::db::PREFETCH_BATCH) {
        let [name, key, item] = argv else {
            continue;
        };
        if !names_a_filter_command(name) {
            continue;
        }
        let value = match last {
            Some((k, v)) if k == &key[..] => v,
            _ => {
                let i = db.stripe(key);
                if stripe.as_ref().is_none_or(|(held, _)| *held != i) {
                    // The old guard goes first: one stripe at a time, never two.
                    drop(stripe.take());
                    stripe = Some((i, engine.store.stripes.read(i)));
                }
                let v = db.peek_value(key);
                last = Some((&key[..], v));
                v
            }
        };
        // The hash each prefetch computes is kept for the command (`ReadView::batch_hash`).
        match value {
            // Not for BF.ADD, whose own prefetch already covers the probes it writes: with the
            // batch's prefetch too, its server CPU per request went up (1.43 -> 1.63 us, pinned,
            // 10M-capacity filter, 5 rounds) while BF.EXISTS's went down (1.40 -> 1.23). Tried
            // again with the hash kept for the command (2026-12-07): 0.86 -> 0.81 and 0.95 ->
            // 0.92 us in two runs, within the noise, for +511 instructions a request.
            Some(Value::Bloom(b)) if name.eq_ignore_ascii_case(b"BF.EXISTS") => {
                if let Some((a, h2)) = b.prefetch_item(item) {
                    let wide = b.hashes_wide();
                    client
                        .prefetched
                        .push(item, ItemHash::Bloom { wide, a, b: h2 });
                }
            }
            Some(Value::Cuckoo(c)) => {
                if let Some(h) = c.prefetch_item(item) {
                    client.prefetched.push(item, ItemHash::Cuckoo(h));
                }
            }
            _ => {}
        }
    }
}

/// `BF.` or `CF.` in any case: a cheap test that keeps the filter prefetch's lookup away from
/// every other command.
#[inline]
fn names_a_filter_command(name: &[u8]) -> bool {
    name.len() > 3
        && matches!(name[0] | 0x20, b'b' | b'c')
        && name[1] | 0x20 == b'f'
        && name[2] == b'.'
}

pub fn dispatch(
    shared: &Shared,
    engine: &mut Engine,
    client: &mut ClientState,
    argv: &[Bytes],
    now_ms: u64,
) -> Reply {
    let found = argv.first().and_then(|name| table().get(name));
    dispatch_found(shared, engine, client, argv, now_ms, found)
}

/// [`dispatch`] of a command already looked up in the table (`found`), so a caller that needed the spec first does not look it up twice
/// (`shared_path`: ~80 instructions of a `-P 1` request).
pub fn dispatch_found(
    shared: &Shared,
    engine: &mut Engine,
    client: &mut ClientState,
    argv: &[Bytes],
    now_ms: u64,
    found: Lookup,
) -> Reply {
    let reply = dispatch_inner(shared, engine, client, argv, now_ms, found);
    if let Reply::Error(e) = &reply {
        *engine.error_stats.entry(e.code()).or_insert(0) += 1;
    }
    log_command(client, argv);
    reply
}

/// `loglevel debug` logs every command with the client's id and name: the MONITOR-free way to see
/// what a tool such as Sentinel sends (the arguments are only formatted when enabled).
/// Inlined up to the level test (the debug log is off in production), the formatting apart.
#[inline]
fn log_command(client: &ClientState, argv: &[Bytes]) {
    if tracing::enabled!(tracing::Level::DEBUG) {
        log_command_line(client, argv);
    }
}

#[inline(never)]
fn log_command_line(client: &ClientState, argv: &[Bytes]) {
    tracing::debug!(
        "command id={} name={} argv={}",
        client.handle.id,
        client_name(client),
        show_argv(argv)
    );
}

fn client_name(client: &ClientState) -> String {
    match client.handle.name.lock() {
        Ok(n) => n
            .as_ref()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// The first arguments of a command, each cut at 64 bytes, for the debug log.
fn show_argv(argv: &[Bytes]) -> String {
    let mut out = String::new();
    for (i, a) in argv.iter().take(8).enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&String::from_utf8_lossy(&a[..a.len().min(64)]));
    }
    if argv.len() > 8 {
        out.push_str(" ...");
    }
    out
}

fn dispatch_inner(
    shared: &Shared,
    engine: &mut Engine,
    client: &mut ClientState,
    argv: &[Bytes],
    now_ms: u64,
    found: Lookup,
) -> Reply {
    if argv.is_empty() {
        return Reply::Status("OK");
    }
    let Some((index, spec)) = found else {
        // Redis's lastcmd is NULL after an unknown command (CLIENT LIST `cmd=NULL`).
        client.handle.last_cmd.store(0, Ordering::Relaxed);
        if client.multi.is_some() {
            client.multi_error = true;
        }
        return Reply::Error(CmdError::unknown_command(argv));
    };
    // The last command is recorded at lookup, as Redis's processCommand sets c->lastcmd: a
    // command refused below (wrong arity, NOAUTH, ...) or queued by MULTI is the client's last
    // command all the same. `execute` records nothing, so the commands EXEC runs leave `exec`.
    client
        .handle
        .last_cmd
        .store(last_command_code(index, None), Ordering::Relaxed);
    if !spec.arity_ok(argv.len()) {
        return reject(engine, client, index, spec, CmdError::arity(spec.name));
    }
    // What runs: the command, or the container's subcommand.
    let effective = if spec.subcommands.is_empty() {
        spec
    } else {
        record_subcommand(&client.handle, index, spec, argv)
    };
    // As Redis's processCommand: protected commands are refused before authentication.
    if let Some(refusal) = refuse_protected(shared, client, spec, effective) {
        return reject(engine, client, index, spec, refusal);
    }
    if !client.authenticated && !spec.has(flags::NOAUTH) {
        return reject(engine, client, index, spec, CmdError::Static(error::NOAUTH));
    }
    // A RESP2 connection with a subscription only takes the pub/sub commands, PING, QUIT and
    // RESET; the name in the error is the subcommand's when there is one, so a bad subcommand
    // is reported first, as Redis resolves it at lookup.
    if client.proto == 2
        && !engine.pubsub.is_empty()
        && engine.pubsub.is_subscriber(client.handle.id)
        && !pubsub::allowed_in_subscriber_context(spec.name)
    {
        let name = if !spec.subcommands.is_empty() && argv.len() >= 2 {
            match subcommand(spec, argv) {
                Ok(sub) => sub.name,
                Err(e) => return Reply::Error(e),
            }
        } else {
            spec.name
        };
        engine.stats[index].rejected += 1;
        if client.multi.is_some() {
            client.multi_error = true;
        }
        return Reply::Error(CmdError::subscriber_context(name));
    }
    // A MONITOR client is a replica to Redis: it may not touch the keyspace.
    if client.monitor && spec.flags & (flags::READONLY | flags::WRITE | flags::MAY_REPLICATE) != 0 {
        engine.stats[index].rejected += 1;
        return Reply::Error(CmdError::Static(error::MONITOR_KEYSPACE));
    }
    // As Redis's processCommand, before the command is queued or run: evict keys while over
    // `maxmemory` (a deny-oom command still over it is refused below, `refuse`). Not for the
    // link to our primary, nor for the AOF's replay.
    let eviction = if !client.is_master && !client.replaying {
        crate::engine::evict::perform(shared, engine)
    } else {
        crate::engine::evict::Outcome::Ok
    };
    // As Redis's processCommand, before the command is queued or run: keep the tracking table
    // within tracking-table-max-keys.
    engine
        .pubsub
        .limit_tracked_keys(shared, Some(client.handle.id));
    if client.multi.is_some() && !transactions::runs_inside_multi(spec.name) {
        // Container commands are checked for a known subcommand before queuing, as Redis does.
        if !spec.subcommands.is_empty() && argv.len() >= 2 {
            if let Err(e) = subcommand(spec, argv) {
                client.multi_error = true;
                return Reply::Error(e);
            }
        }
        transactions::queue(client, index, argv);
        return Reply::Status("QUEUED");
    }
    if let Some(refusal) = replication::refuse(shared, &engine.repl, client, spec, now_ms) {
        engine.stats[index].rejected += 1;
        if client.multi.is_some() {
            client.multi_error = true;
        }
        return Reply::Error(refusal);
    }
    if let Some(refusal) = refuse(shared, &engine.repl, spec) {
        // Under a policy that evicts, the eviction run above decided, as Redis's
        // performEvictions does: only a run with nothing left to evict refuses the command
        // (one that stopped on its time budget lets it run, EVICT_RUNNING), whatever
        // `used_memory` reads now (other threads allocate meanwhile: the AOF writer).
        let evicted_enough = eviction != crate::engine::evict::Outcome::Failed
            && shared.maxmemory_evicts.load(Ordering::Relaxed)
            && matches!(refusal, CmdError::Static(e) if e == error::OOM);
        if client.is_master {
            // The primary's stream is applied whatever this server's disk says (MISCONF, an
            // AOF write error): refusing it would drop the write from this replica alone,
            // which then diverges in silence. Redis panics there unless
            // `repl-ignore-disk-write-error`, and applies with a warning if so; applying keeps
            // the data whole.
            warn_applying_despite(&refusal);
        } else if !evicted_enough {
            return reject(engine, client, index, spec, refusal);
        }
    }
    run(shared, engine, client, index, spec, argv, now_ms)
}

/// Logs, at most every 10 s as Redis does, that the replica applies its primary's writes though
/// it would refuse them to a client (a disk error).
#[cold]
fn warn_applying_despite(refusal: &CmdError) {
    static LAST_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = now_ms();
    let last = LAST_MS.load(Ordering::Relaxed);
    if now >= last + 10_000 && LAST_MS.swap(now, Ordering::Relaxed) == last {
        tracing::warn!(
            "Replica is applying a command even though it would refuse it to a client: {refusal}"
        );
    }
}

/// A command the dispatcher refuses (Redis's rejectCommand): counted, flags a transaction being
/// queued, and an EXEC refused this way discards the transaction and answers EXECABORT naming the
/// reason (execCommandAbort). Redis's arity text carries no `ERR` there; other reasons keep their
/// code (`NOAUTH`, `OOM`, ...).
fn reject(
    engine: &mut Engine,
    client: &mut ClientState,
    index: usize,
    spec: &CommandSpec,
    err: CmdError,
) -> Reply {
    engine.stats[index].rejected += 1;
    if spec.name != "exec" {
        if client.multi.is_some() {
            client.multi_error = true;
        }
        return Reply::Error(err);
    }
    transactions::discard_transaction(client, &mut engine.store);
    let text = err.to_string();
    let reason = match &err {
        CmdError::WrongArity(_) => text.strip_prefix("ERR ").unwrap_or(&text),
        _ => &text,
    };
    Reply::Error(CmdError::Owned(format!(
        "EXECABORT Transaction discarded because of: {reason}"
    )))
}

/// DEBUG and MODULE LOAD/LOADEX/UNLOAD unless `enable-debug-command` / `enable-module-command`
/// allow them for this client (`yes`, or `local` from a loopback address). `effective` is what
/// runs: `spec`, or its subcommand.
fn refuse_protected(
    shared: &Shared,
    client: &ClientState,
    spec: &'static CommandSpec,
    effective: &'static CommandSpec,
) -> Option<CmdError> {
    if !effective.has(flags::PROTECTED) {
        return None;
    }
    let is_debug = spec.name == "debug";
    let c = shared.config();
    let setting = if is_debug {
        &c.enable_debug_command
    } else {
        &c.enable_module_command
    };
    if crate::config::allows_protected(setting, client.handle.addr.is_local()) {
        return None;
    }
    Some(CmdError::Static(if is_debug {
        error::DEBUG_NOT_ALLOWED
    } else {
        error::MODULE_NOT_ALLOWED
    }))
}

/// Refusals that depend on server state: deny-oom under maxmemory (not on a replica, whose
/// `repl` has a primary: Redis's `replica-ignore-maxmemory yes`, so that its primary's writes all
/// apply and a writable replica's clients get no OOM), writes after a failed save, commands while
/// loading. Inlined up to the common answer, none: every command passes here, and the call and
/// the full checks cost ~50 instructions of an unpipelined PING's ~3,100.
#[inline]
fn refuse(shared: &Shared, repl: &ReplState, spec: &CommandSpec) -> Option<CmdError> {
    if !may_refuse(shared, spec) {
        return None;
    }
    refuse_checked(shared, repl, spec)
}

/// Whether [`refuse`] refuses, for a caller that only falls back (the shared path): no
/// `Option<CmdError>` to drop, whose out-of-line drop cost ~14 instructions a request.
#[inline]
fn refuses(shared: &Shared, repl: &ReplState, spec: &CommandSpec) -> bool {
    may_refuse(shared, spec) && refuse_checked(shared, repl, spec).is_some()
}

/// The cheap test in front of [`refuse_checked`]: false when no refusal can apply. Under a
/// `maxmemory` limit the cheap half of the memory comparison is made here (two loads while far
/// under the limit, `alloc::surely_at_most`), so a deny-oom command does not leave the inlined
/// path on every call.
#[inline]
fn may_refuse(shared: &Shared, spec: &CommandSpec) -> bool {
    shared.loading.load(Ordering::Relaxed)
        || (spec.has(flags::DENYOOM) && {
            let max = shared.maxmemory.load(Ordering::Relaxed);
            max > 0 && !crate::engine::alloc::surely_at_most(max)
        })
        || ((spec.has(flags::WRITE) || spec.name == "ping")
            && (shared.bgsave_failed.load(Ordering::Relaxed)
                || crate::persistence::aof::disk_failed(shared)))
}

#[inline(never)]
fn refuse_checked(shared: &Shared, repl: &ReplState, spec: &CommandSpec) -> Option<CmdError> {
    if shared.loading.load(Ordering::Relaxed) && !spec.has(flags::LOADING) {
        return Some(CmdError::Static(error::LOADING));
    }
    if spec.has(flags::DENYOOM) && repl.master.is_none() {
        let max = shared.maxmemory.load(Ordering::Relaxed);
        if max > 0 && crate::engine::memory::over_maxmemory(shared, repl, max) {
            return Some(CmdError::Static(error::OOM));
        }
    }
    if spec.has(flags::WRITE) && shared.misconf() {
        return Some(CmdError::Static(error::MISCONF));
    }
    // PING too, as Redis's processCommand does: a health check then sees the disk problem.
    if spec.has(flags::WRITE) || spec.name == "ping" {
        if let Some(text) = crate::persistence::aof::disk_error(shared) {
            return Some(CmdError::Owned(text));
        }
    }
    None
}

/// Refuses a filter that was just created (and so reserved its bytes, counted in `used_memory`)
/// when the reservation takes `used_memory` over `maxmemory` (`max`, 0 = no limit), with Redis's
/// OOM error. Redis checks only before a command, so it accepts one reservation of any size while
/// under the limit (RedisBloom then `calloc`s it); checking after the reservation too means one
/// command can never commit the server to more than `maxmemory`. The caller drops the filter.
///
/// It compares the whole `used_memory`, what `engine::memory::not_counted` leaves out included
/// (the handlers that call it do not hold the replication state): stricter than the check before
/// the command, never looser.
pub(crate) fn reservation_fits(max: u64) -> Result<(), CmdError> {
    if max > 0
        && !crate::engine::alloc::surely_at_most(max)
        && crate::engine::memory::used_memory() > max
    {
        return Err(CmdError::Static(error::OOM));
    }
    Ok(())
}

/// Replays one command read from an AOF, as Redis's loader runs its fake client: no
/// authentication, no refusals (the server is loading), MULTI queues and EXEC runs the queue; the
/// reply is dropped by the caller (a failing command does not stop the load).
pub fn replay(
    shared: &Shared,
    engine: &mut Engine,
    client: &mut ClientState,
    argv: &[Bytes],
    now_ms: u64,
) -> Reply {
    let Some((index, spec)) = argv.first().and_then(|n| table().get(n)) else {
        return Reply::Error(CmdError::unknown_command(argv));
    };
    if !spec.arity_ok(argv.len()) {
        return Reply::Error(CmdError::arity(spec.name));
    }
    if client.multi.is_some() && !transactions::runs_inside_multi(spec.name) {
        transactions::queue(client, index, argv);
        return Reply::Status("QUEUED");
    }
    run(shared, engine, client, index, spec, argv, now_ms)
}

/// A replayer for `persistence::aof::load`: a loader client of its own (database 0, as Redis's
/// AOF fake client starts), each command timed by the wall clock.
pub fn aof_replayer() -> Box<crate::persistence::aof::Replay<'static>> {
    let addr = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
    let handle = Arc::new(ClientHandle::new(0, addr, addr));
    let mut client = ClientState::new(handle, true);
    client.replaying = true;
    Box::new(
        move |shared: &Shared, engine: &mut Engine, argv: &[Bytes]| {
            let now = now_ms();
            let reply = replay(shared, engine, &mut client, argv, now);
            if let Reply::Error(e) = &reply {
                tracing::debug!(
                    "AOF replay: {} answered {e}",
                    String::from_utf8_lossy(&argv[0])
                );
            }
        },
    )
}

/// The server-state refusals EXEC re-checks for each queued command.
pub fn refuse_at_exec(shared: &Shared, repl: &ReplState, spec: &CommandSpec) -> Option<CmdError> {
    refuse(shared, repl, spec)
}

/// Executes a command that passed the dispatcher's checks.
pub fn run(
    shared: &Shared,
    engine: &mut Engine,
    client: &mut ClientState,
    index: usize,
    spec: &'static CommandSpec,
    argv: &[Bytes],
    now_ms: u64,
) -> Reply {
    let mut ctx = Ctx {
        store: &mut engine.store,
        pubsub: &mut engine.pubsub,
        client,
        shared,
        now_ms,
        stats: &mut engine.stats,
        shared_stats: &engine.shared_stats,
        error_stats: &mut engine.error_stats,
        repl: &mut engine.repl,
        stream: engine.stream.get_mut(),
        shut_down: &mut engine.shut_down,
    };
    let reply = execute(&mut ctx, index, spec, argv);
    // The outermost call ends the unit: EXEC's queued commands share it.
    if engine.stream.is_active() {
        engine.stream.get_mut().end_unit();
    }
    engine.pump_repl();
    reply
}

/// Runs the handler (resolving a container's subcommand first), catching a panic so one bad
/// command never takes the server down, and records the statistics. EXEC calls this for each
/// queued command. It does not record the client's last command: the dispatcher did at lookup,
/// and a command EXEC runs leaves `exec` there (Redis's execCommand sets no lastcmd).
pub fn execute(ctx: &mut Ctx, index: usize, spec: &'static CommandSpec, argv: &[Bytes]) -> Reply {
    // A command EXEC runs finds no mark (EXEC took it) and reads the clock itself.
    let (started, chained) = match ctx.client.cmd_clock.take() {
        Some(t) => (t, true),
        None => (crate::engine::mono_ns(), false),
    };
    let tracking = ctx.stream.is_active();
    let changes_before = if tracking {
        ctx.stream.command = Default::default();
        ctx.store.changes()
    } else {
        0
    };
    let mut ran = spec;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if spec.subcommands.is_empty() || argv.len() < 2 {
            (spec.handler)(ctx, argv)
        } else {
            match subcommand(spec, argv) {
                Ok(sub) => {
                    ran = sub;
                    (sub.handler)(ctx, argv)
                }
                Err(e) => Err(e),
            }
        }
    }));
    // MONITOR shows what ran, after it ran (so SELECT shows its new db), except admin commands.
    if !ctx.pubsub.monitors.is_empty() && !ran.has(flags::ADMIN | flags::SKIP_MONITOR) {
        if let Some(own) = ctx.pubsub.feed_monitors(
            ctx.client.handle.id,
            ctx.client.db,
            &ctx.client.handle.addr,
            argv,
            &|i| redacted(argv, i),
        ) {
            ctx.client.after_reply.extend_from_slice(&own);
        }
    }
    let reply = match outcome {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => Reply::Error(e),
        Err(_) => {
            tracing::error!(
                command = spec.name,
                "command handler panicked; replying with an error"
            );
            Reply::Error(CmdError::Owned(format!(
                "ERR internal error while executing '{}'",
                spec.name
            )))
        }
    };

    if tracking {
        propagate_after(ctx, spec, argv, changes_before, reply.is_error());
    }
    let me = ctx.client.handle.id;
    crate::engine::notify::publish_events(
        ctx.store,
        ctx.pubsub,
        ctx.shared,
        Some(me),
        ctx.now_ms / 1000,
    );
    track_after(ctx, spec, ran, argv);
    let stat = &mut ctx.stats[index];
    stat.calls += 1;
    let ended = crate::engine::mono_ns();
    let nanos = ended.saturating_sub(started);
    stat.nanos += nanos;
    if chained {
        ctx.client.cmd_clock = Some(ended);
    }
    if reply.is_error() {
        stat.failed += 1;
    }
    // Redis's slowlogPushCurrentCommand: the subcommand's flag decides; the AOF's replay is not
    // logged (nor timed by Redis).
    if ctx.shared.slowlog.is_slow(nanos) && !ran.has(flags::SKIP_SLOWLOG) && !ctx.client.replaying {
        log_slow(ctx.shared, ctx.client, argv, nanos);
    }
    reply
}

/// CLIENT TRACKING after a command (Redis's `call()` and `resetClient`): a read-only command's
/// keys are remembered, self-caused invalidations are sent after the top-level reply, and
/// `CLIENT CACHING` lapses after any command but CLIENT outside a transaction.
fn track_after(ctx: &mut Ctx, spec: &CommandSpec, ran: &CommandSpec, argv: &[Bytes]) {
    let tracking = &mut ctx.pubsub.tracking;
    if !tracking.active() {
        if !ctx.client.in_exec {
            // Owed by a transaction that also turned the last tracking off.
            ctx.pubsub.flush_pending_invalidations(
                ctx.shared,
                &ctx.client.handle,
                &mut ctx.client.after_reply,
            );
        }
        if ctx.store.notify_flags & crate::events::TRACKED != 0 {
            ctx.store.set_tracking(false);
        }
        return;
    }
    let me = ctx.client.handle.id;
    if tracking.state(me).is_some() {
        if ran.has(flags::READONLY) && !ran.has(flags::PUBSUB) {
            tracking.remember(me, &ran.keys(argv));
        }
        let top = !ctx.client.in_exec && ctx.client.multi.is_none();
        if top && spec.name != "client" {
            if let Some(st) = tracking.state_mut(me) {
                st.caching = false;
            }
        }
    }
    if !ctx.client.in_exec {
        ctx.pubsub.flush_pending_invalidations(
            ctx.shared,
            &ctx.client.handle,
            &mut ctx.client.after_reply,
        );
    }
    if ctx.store.notify_flags & crate::events::TRACKED == 0 {
        ctx.store.set_tracking(true);
    }
}

/// Adds what a command propagates to the current unit of the write stream, following Redis's
/// `call()`: the deletions by expiry it caused, then its own argv (rewritten or verbatim) if it
/// changed the keyspace (a module command: and did not fail) or forced propagation. EXEC never
/// propagates itself (its queued commands did).
fn propagate_after(
    ctx: &mut Ctx,
    spec: &CommandSpec,
    argv: &[Bytes],
    changes_before: u64,
    failed: bool,
) {
    crate::engine::push_expired(ctx.store, ctx.stream);
    if !ctx.stream.is_active() {
        return;
    }
    let request = std::mem::take(&mut ctx.stream.command);
    if request.prevent || spec.name == "exec" {
        return;
    }
    let changed = ctx.store.changes() != changes_before;
    // A module command that answered an error propagates only if it forced it (RedisBloom calls
    // ReplicateVerbatim on success, and in a few error paths the handlers mark).
    if request.force || (changed && !(failed && spec.has(flags::MODULE))) {
        let db = ctx.client.db;
        match &request.argv {
            Some(rewritten) => ctx.stream.push(db, rewritten),
            None => ctx.stream.push(db, argv),
        }
    }
}

/// True if argument `i` is a secret MONITOR and the slow log must not show: AUTH's arguments,
/// HELLO's AUTH username and password, and the values CONFIG SET gives the sensitive directives
/// (`requirepass`, `masterauth`, `masteruser`), as Redis redacts them.
fn redacted(argv: &[Bytes], i: usize) -> bool {
    let name = &argv[0];
    if name.eq_ignore_ascii_case(b"auth") {
        return i > 0;
    }
    if name.eq_ignore_ascii_case(b"hello") {
        return (2..i).any(|j| argv[j].eq_ignore_ascii_case(b"auth") && (i == j + 1 || i == j + 2));
    }
    if name.eq_ignore_ascii_case(b"config")
        && argv.get(1).is_some_and(|s| s.eq_ignore_ascii_case(b"set"))
        && i >= 3
        && i % 2 == 1
    {
        return [&b"requirepass"[..], b"masterauth", b"masteruser"]
            .iter()
            .any(|secret| argv[i - 1].eq_ignore_ascii_case(secret));
    }
    false
}

/// Logs a command that ran `nanos` in the slow log (the caller checked the threshold and the
/// command's `skip_slowlog`), with the client's address and name.
#[cold]
#[inline(never)]
pub(crate) fn log_slow(shared: &Shared, client: &ClientState, argv: &[Bytes], nanos: u64) {
    let name = client
        .handle
        .name
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    shared.slowlog.push(
        argv,
        |i| redacted(argv, i),
        nanos,
        crate::engine::now_ms() / 1000,
        client.handle.addr.to_string(),
        name,
    );
}

/// Shorthand used by the families' tables.
#[allow(clippy::too_many_arguments)]
pub const fn cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    first_key: i32,
    last_key: i32,
    step: i32,
    group: &'static str,
    since: &'static str,
    summary: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key,
        last_key,
        step,
        group,
        since,
        summary,
        handler,
        subcommands: &[],
        shared: None,
        shared_parallel_only: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Up to 8 bytes both words are the name zero-padded; up to 16 they are its first and last
    /// eight bytes. Either way the words and the length give back every byte.
    #[test]
    fn name_words_hold_the_whole_name_up_to_16_bytes() {
        let name: Vec<u8> = (1..=16u8).map(|b| b.wrapping_mul(37)).collect();
        for n in 0..=16 {
            let (a, b) = name_words(&name[..n]);
            let mut padded = [0u8; 8];
            let head = n.min(8);
            padded[..head].copy_from_slice(&name[..head]);
            assert_eq!(a, u64::from_le_bytes(padded), "first word, {n} bytes");
            if n <= 8 {
                assert_eq!(b, a, "{n} bytes");
            } else {
                let mut tail = [0u8; 8];
                tail.copy_from_slice(&name[n - 8..n]);
                assert_eq!(b, u64::from_le_bytes(tail), "last word, {n} bytes");
            }
        }
    }

    /// The table against the plain definition: the first registered command whose name equals
    /// the bytes ignoring ASCII case. Arbitrary bytes, registered names with one byte changed
    /// (where a `| 0x20` fold or a shared first and last eight bytes could mislead the slot),
    /// one byte longer or shorter (the words pad with zeros), and cased at random.
    #[test]
    fn table_agrees_with_a_linear_search() {
        use proptest::prelude::*;
        let t = table();
        let linear = |name: &[u8]| {
            t.all()
                .iter()
                .position(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
        };
        let names: Vec<&'static str> = t.all().iter().map(|s| s.name).collect();
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases: 4096,
            ..ProptestConfig::default()
        });
        let strategy = (
            0..names.len(),
            any::<u64>(),
            any::<u8>(),
            proptest::collection::vec(any::<u8>(), 0..40),
            0..5u8,
        );
        runner
            .run(&strategy, |(which, case_bits, byte, random, kind)| {
                let name: Vec<u8> = match kind {
                    0 => random,
                    1 => {
                        let mut n = names[which].as_bytes().to_vec();
                        let at = (case_bits as usize) % n.len();
                        n[at] = byte;
                        n
                    }
                    // One byte longer (a zero byte pads the same words) or shorter.
                    2 => {
                        let mut n = names[which].as_bytes().to_vec();
                        n.push(byte);
                        n
                    }
                    3 => {
                        let n = names[which].as_bytes();
                        n[..n.len() - 1].to_vec()
                    }
                    _ => names[which]
                        .bytes()
                        .enumerate()
                        .map(|(i, b)| {
                            if case_bits >> (i % 64) & 1 == 1 {
                                b.to_ascii_uppercase()
                            } else {
                                b
                            }
                        })
                        .collect(),
                };
                let got = t.get(&name).map(|(i, _)| i);
                prop_assert_eq!(got, linear(&name), "{:?}", String::from_utf8_lossy(&name));
                Ok(())
            })
            .unwrap();
    }

    /// Every registered name is found in any case, at its own index; near misses are not.
    #[test]
    fn table_finds_every_command_in_any_case() {
        let t = table();
        for (i, spec) in t.all().iter().enumerate() {
            let lower = spec.name.as_bytes();
            let upper = spec.name.to_ascii_uppercase();
            let mixed: Vec<u8> = lower
                .iter()
                .enumerate()
                .map(|(j, b)| {
                    if j % 2 == 0 {
                        b.to_ascii_uppercase()
                    } else {
                        *b
                    }
                })
                .collect();
            for name in [lower, upper.as_bytes(), &mixed[..]] {
                let (index, found) = t.get(name).expect("registered name");
                assert_eq!((index, found.name), (i, spec.name));
            }
            let mut longer = lower.to_vec();
            longer.push(b'x');
            assert!(t
                .get(&longer)
                .is_none_or(|(_, s)| s.name.as_bytes() == &longer[..]));
            assert!(t
                .get(&lower[..lower.len() - 1])
                .is_none_or(|(_, s)| s.name.len() + 1 == lower.len()));
        }
        assert!(t.get(b"").is_none());
        assert!(t.get(b"nosuchcommand").is_none());
        assert!(t.get(&[b'g'; 100]).is_none());
        // Bytes that case-fold onto letters only under `| 0x20` must not match.
        assert!(t.get(b"G\x05T").is_none());
    }
}
