//! Every error a client can see, as the exact text Redis or RedisBloom sends (floor 7, the bottom:
//! imports nothing from the crate).
//!
//! A `CmdError` renders the bytes after the leading `-` of the RESP error line. Most texts are fixed
//! and live here as named constants, each with a comment naming the upstream command that emits it;
//! the few that embed an argument (unknown command, arity, unknown subcommand) are enum variants that
//! format themselves the way Redis does.
//!
//! Texts marked "no ERR" are sent without an `ERR` prefix, exactly as RedisBloom writes them.

use std::fmt;

// ---------------------------------------------------------------------------------------------
// Generic Redis errors
// ---------------------------------------------------------------------------------------------

/// Any command: a malformed option list (SET, EXPIRE, SCAN, ...).
pub const SYNTAX: &str = "ERR syntax error";
/// Any command: an integer argument that `string2ll` refuses.
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// INCRBYFLOAT and friends: a float argument that `string2ld` refuses.
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
/// Any command touching a key of another type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// INCR/DECR family on overflow.
pub const INCR_OVERFLOW: &str = "ERR increment or decrement would overflow";
/// INCRBYFLOAT producing NaN or infinity.
pub const INCR_NAN: &str = "ERR increment would produce NaN or Infinity";
/// RENAME, MOVE, ... on a missing source key.
pub const NO_SUCH_KEY: &str = "ERR no such key";
/// SELECT, MOVE, COPY DB with an index at or above `databases`.
pub const DB_INDEX_RANGE: &str = "ERR DB index is out of range";
/// SELECT with an integer outside int (getIntFromObjectOrReply's range check; the missing "to" is
/// Redis's).
pub const INT_RANGE: &str =
    "ERR value is out of range, value must between -2147483648 and 2147483647";
/// MODULE LOAD/LOADEX/UNLOAD refused by `enable-module-command` (processCommand).
pub const MODULE_NOT_ALLOWED: &str = "ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";
/// MODULE LOAD/LOADEX: hyperbloom cannot load shared objects (moduleLoad's failure reply).
pub const MODULE_LOAD_FAILED: &str =
    "ERR Error loading the extension. Please check the server logs.";
/// SETRANGE/APPEND growing a string past 512 MB.
pub const STRING_TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
/// SETRANGE with a negative offset.
pub const OFFSET_RANGE: &str = "ERR offset is out of range";
/// EXPIRE family: an expire time that overflows when converted to milliseconds.
pub const EXPIRE_INVALID: &str = "ERR invalid expire time in '{}' command";
/// DECRBY with the decrement -9223372036854775808 (its negation overflows).
pub const DECR_OVERFLOW: &str = "ERR decrement would overflow";
/// MOVE, COPY DB: an integer that does not fit a C `int` (`getIntFromObjectOrReply`; sic).
pub const NOT_INT32: &str =
    "ERR value is out of range, value must between -2147483648 and 2147483647";
/// EXPIRE family: NX combined with XX, GT or LT.
pub const EXPIRE_NX_AND_OTHERS: &str =
    "ERR NX and XX, GT or LT options at the same time are not compatible";
/// EXPIRE family: GT combined with LT.
pub const EXPIRE_GT_AND_LT: &str = "ERR GT and LT options at the same time are not compatible";
/// SCAN with a cursor that is not an unsigned integer.
pub const INVALID_CURSOR: &str = "ERR invalid cursor";
/// OBJECT FREQ when the maxmemory policy is not an LFU one.
pub const OBJECT_FREQ_NO_LFU: &str = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
/// OBJECT IDLETIME when the maxmemory policy is an LFU one.
pub const OBJECT_IDLETIME_LFU: &str = "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
/// Any command before AUTH when `requirepass` is set.
pub const NOAUTH: &str = "NOAUTH Authentication required.";
/// AUTH with a wrong password.
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
/// AUTH when no password is configured.
pub const AUTH_NO_PASSWORD: &str = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?";
/// MULTI inside MULTI.
pub const MULTI_NESTED: &str = "ERR MULTI calls can not be nested";
/// EXEC without MULTI.
pub const EXEC_WITHOUT_MULTI: &str = "ERR EXEC without MULTI";
/// DISCARD without MULTI.
pub const DISCARD_WITHOUT_MULTI: &str = "ERR DISCARD without MULTI";
/// WATCH inside MULTI.
pub const WATCH_IN_MULTI: &str = "ERR WATCH inside MULTI is not allowed";
/// EXEC after a queued command failed.
pub const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";
/// Commands refused by `maxmemory` (deny-oom commands).
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
/// Accept-time refusal when `maxclients` is reached.
pub const MAX_CLIENTS: &str = "ERR max number of clients reached";
/// CLIENT SETNAME / HELLO SETNAME with a bad character.
pub const CLIENT_NAME_CHARS: &str =
    "ERR Client names cannot contain spaces, newlines or special characters.";
/// HELLO with a bad protocol version.
pub const HELLO_PROTO_NOT_INT: &str = "ERR Protocol version is not an integer or out of range";
/// HELLO 4 and above.
pub const NOPROTO: &str = "NOPROTO unsupported protocol version";
/// processCommand while the AOF cannot be written or fsynced (`writeCommandsGetDiskErrorMessage`,
/// Redis 7.0): this prefix, then `strerror(aof_last_write_errno)`.
pub const MISCONF_AOF: &str = "MISCONF Errors writing to the AOF file: ";
/// Writes while the last background save failed and `stop-writes-on-bgsave-error` is on.
pub const MISCONF: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";
/// Any command while the dataset is loading.
pub const LOADING: &str = "LOADING Redis is loading the dataset in memory";
/// DEBUG without `enable-debug-command`.
pub const DEBUG_NOT_ALLOWED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";
/// SHUTDOWN whose final save failed (without FORCE).
pub const SHUTDOWN_FAILED: &str = "ERR Errors trying to SHUTDOWN. Check logs.";
/// RENAME/COPY/... where source and destination coincide (MOVE, COPY).
pub const SAME_OBJECT: &str = "ERR source and destination objects are the same";
/// Any command but (P|S)(UN)SUBSCRIBE, PING, QUIT and RESET from a RESP2 client with a
/// subscription (`processCommand`); `{}` is the command's full name (`client|list`).
pub const SUBSCRIBER_CONTEXT: &str = "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context";
/// A MONITOR client running a keyspace command (Redis flags monitors as replicas).
pub const MONITOR_KEYSPACE: &str = "ERR Replica can't interact with the keyspace";

// CLIENT TRACKING / CLIENT CACHING (networking.c clientCommand, tracking.c).
/// CLIENT TRACKING ... REDIRECT given twice.
pub const TRACKING_ONE_REDIRECT: &str = "ERR A client can only redirect to a single other client";
/// CLIENT TRACKING ... REDIRECT to an id no client has.
pub const TRACKING_NO_REDIRECT_TARGET: &str =
    "ERR The client ID you want redirect to does not exist";
/// CLIENT TRACKING ON PREFIX without BCAST.
pub const TRACKING_PREFIX_NEEDS_BCAST: &str = "ERR PREFIX option requires BCAST mode to be enabled";
/// CLIENT TRACKING ON switching BCAST while tracking is on.
pub const TRACKING_BCAST_SWITCH: &str = "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.";
/// CLIENT TRACKING ON BCAST with OPTIN or OPTOUT.
pub const TRACKING_BCAST_OPTS: &str = "ERR OPTIN and OPTOUT are not compatible with BCAST";
/// CLIENT TRACKING ON OPTIN OPTOUT.
pub const TRACKING_OPTIN_AND_OPTOUT: &str = "ERR You can't specify both OPTIN mode and OPTOUT mode";
/// CLIENT TRACKING ON switching between OPTIN and OPTOUT while tracking is on.
pub const TRACKING_OPT_SWITCH: &str = "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.";
/// CLIENT CACHING without tracking on.
pub const CACHING_NOT_TRACKING: &str = "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled";
/// CLIENT CACHING YES outside OPTIN mode.
pub const CACHING_YES_NEEDS_OPTIN: &str =
    "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.";
/// CLIENT CACHING NO outside OPTOUT mode.
pub const CACHING_NO_NEEDS_OPTOUT: &str =
    "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.";
/// A background save is already running.
pub const BGSAVE_IN_PROGRESS: &str = "ERR Background save already in progress";
/// BGREWRITEAOF while a rewrite runs (Redis 7.0 `bgrewriteaofCommand`).
pub const AOF_REWRITE_IN_PROGRESS: &str =
    "ERR Background append only file rewriting already in progress";
/// processCommand: a write on a read-only replica from one of its own clients.
pub const READONLY: &str = "READONLY You can't write against a read only replica.";
/// processCommand: a write on a primary with fewer good replicas than min-replicas-to-write.
pub const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";
/// processCommand: replica-serve-stale-data no while the link to the primary is down.
pub const MASTERDOWN: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";
/// syncCommand: a sub-replica asks a replica that is not synced with its own primary.
pub const NOMASTERLINK: &str = "NOMASTERLINK Can't SYNC while not connected with my master";
/// waitCommand on a replica.
pub const WAIT_ON_REPLICA: &str = "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.";
/// getTimeoutFromObjectOrReply (WAIT).
pub const TIMEOUT_NEGATIVE: &str = "ERR timeout is negative";
/// getTimeoutFromObjectOrReply with a millisecond timeout that is not an integer (WAIT, CLIENT
/// PAUSE).
pub const TIMEOUT_NOT_INTEGER: &str = "ERR timeout is not an integer or out of range";
/// replicaofCommand: REPLICAOF's port argument.
pub const INVALID_MASTER_PORT: &str = "ERR Invalid master port";
/// syncCommand: PSYNC inside MULTI.
pub const REPLICA_IN_MULTI: &str = "ERR Replica can't be in MULTI";
/// scriptCommand KILL with no script running (Sentinel sends it before a failover).
pub const NOTBUSY: &str = "NOTBUSY No scripts in execution right now.";
/// getKeysSubcommandImpl (COMMAND GETKEYS / GETKEYSANDFLAGS): no such command or subcommand.
pub const GETKEYS_INVALID_COMMAND: &str = "ERR Invalid command specified";
/// getKeysSubcommandImpl: the command takes no keys.
pub const GETKEYS_NO_KEYS: &str = "ERR The command has no key arguments";
/// getKeysSubcommandImpl: the command's arity refuses that many arguments.
pub const GETKEYS_ARITY: &str = "ERR Invalid number of arguments specified for command";
/// getKeysSubcommandImpl: the arguments hold none of the command's keys.
pub const GETKEYS_INVALID_ARGUMENTS: &str = "ERR Invalid arguments specified for command";

/// An error reply. Renders as the exact text after the `-` of the RESP error line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmdError {
    /// A fixed text, one of the constants in this module (or in a command family's module).
    Static(&'static str),
    /// A text that embeds an argument; already complete, prefix included.
    Owned(String),
    /// `ERR wrong number of arguments for '<name>' command`, name as registered.
    WrongArity(String),
    /// `ERR unknown command '<name>', with args beginning with: '<a>' ...`. Raw bytes: Redis
    /// echoes the client's bytes as they are (cut at a NUL, as C's `%s` does).
    UnknownCommand { name: Vec<u8>, args: Vec<u8> },
    /// `ERR unknown subcommand '<sub>'. Try <CONTAINER> HELP.`
    UnknownSubcommand { sub: String, container: String },
}

impl CmdError {
    /// Builds the unknown-command error exactly as Redis formats it: each argument quoted and followed
    /// by a space, the whole argument text stops growing once it reaches 128 characters, the name is cut
    /// at 128 characters and CR/LF become spaces.
    pub fn unknown_command(argv: &[bytes::Bytes]) -> CmdError {
        // A C string ends at NUL; `%.Ns` prints at most N bytes of it; CR/LF would break the line.
        let clean = |b: &[u8], max: usize| -> Vec<u8> {
            let end = b.iter().position(|&c| c == 0).unwrap_or(b.len()).min(max);
            b[..end]
                .iter()
                .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
                .collect()
        };
        let name = argv.first().map(|n| clean(n, 128)).unwrap_or_default();
        let mut args = Vec::new();
        for a in argv.iter().skip(1) {
            if args.len() >= 128 {
                break;
            }
            let room = 128 - args.len();
            args.push(b'\'');
            args.extend_from_slice(&clean(a, room));
            args.extend_from_slice(b"' ");
        }
        CmdError::UnknownCommand { name, args }
    }

    /// The exact bytes of the error line (after `-`), CR/LF replaced by spaces.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = match self {
            CmdError::UnknownCommand { name, args } => {
                let mut v = b"ERR unknown command '".to_vec();
                v.extend_from_slice(name);
                v.extend_from_slice(b"', with args beginning with: ");
                v.extend_from_slice(args);
                v
            }
            other => other.to_string().into_bytes(),
        };
        for b in out.iter_mut() {
            if *b == b'\r' || *b == b'\n' {
                *b = b' ';
            }
        }
        out
    }

    /// The arity error for a command or `container|sub`.
    pub fn arity(name: &str) -> CmdError {
        CmdError::WrongArity(name.to_ascii_lowercase())
    }

    /// The RESP2 subscriber-context refusal for the command registered as `name`.
    pub fn subscriber_context(name: &str) -> CmdError {
        CmdError::Owned(SUBSCRIBER_CONTEXT.replacen("{}", name, 1))
    }

    /// A known subcommand with arguments its handler refuses (Redis's
    /// `addReplySubcommandSyntaxError`): the subcommand as the client spelled it, the container's
    /// name upper-cased.
    pub fn subcommand_syntax(argv: &[bytes::Bytes]) -> CmdError {
        let sub = argv
            .get(1)
            .map(|s| String::from_utf8_lossy(s))
            .unwrap_or_default();
        let container = argv
            .first()
            .map(|c| String::from_utf8_lossy(c))
            .unwrap_or_default();
        CmdError::Owned(format!(
            "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try {} HELP.",
            container.to_ascii_uppercase()
        ))
    }

    pub fn unknown_subcommand(sub: &[u8], container: &str) -> CmdError {
        CmdError::UnknownSubcommand {
            sub: String::from_utf8_lossy(sub).replace(['\r', '\n'], " "),
            container: container.to_ascii_uppercase(),
        }
    }

    /// The first word of the text: the code INFO errorstats counts under.
    pub fn code(&self) -> String {
        let text = self.to_string();
        text.split(' ').next().unwrap_or("ERR").to_string()
    }
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmdError::Static(s) => f.write_str(s),
            CmdError::Owned(s) => f.write_str(s),
            CmdError::WrongArity(name) => {
                write!(f, "ERR wrong number of arguments for '{name}' command")
            }
            CmdError::UnknownCommand { name, args } => write!(
                f,
                "ERR unknown command '{}', with args beginning with: {}",
                String::from_utf8_lossy(name),
                String::from_utf8_lossy(args)
            ),
            CmdError::UnknownSubcommand { sub, container } => {
                write!(f, "ERR unknown subcommand '{sub}'. Try {container} HELP.")
            }
        }
    }
}

impl std::error::Error for CmdError {}

impl From<&'static str> for CmdError {
    fn from(s: &'static str) -> Self {
        CmdError::Static(s)
    }
}

/// The C library's text for an I/O error (what Redis prints with `strerror`), without Rust's
/// " (os error N)" suffix: "No space left on device".
pub fn strerror(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn unknown_command_matches_redis() {
        let argv = vec![Bytes::from("FOO"), Bytes::from("a"), Bytes::from("b")];
        assert_eq!(
            CmdError::unknown_command(&argv).to_string(),
            "ERR unknown command 'FOO', with args beginning with: 'a' 'b' "
        );
        let argv = vec![Bytes::from("FOO")];
        assert_eq!(
            CmdError::unknown_command(&argv).to_string(),
            "ERR unknown command 'FOO', with args beginning with: "
        );
        let argv = vec![
            Bytes::from("X"),
            Bytes::from(&b"a\x00b"[..]),
            Bytes::from(&b"\xff"[..]),
        ];
        assert_eq!(
            CmdError::unknown_command(&argv).to_bytes(),
            b"ERR unknown command 'X', with args beginning with: 'a' '\xff' "
        );
    }

    #[test]
    fn arity_is_lower_case() {
        assert_eq!(
            CmdError::arity("BF.ADD").to_string(),
            "ERR wrong number of arguments for 'bf.add' command"
        );
    }
}
