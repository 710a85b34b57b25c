//! COMMAND, COMMAND COUNT / INFO / DOCS / LIST / GETKEYS / GETKEYSANDFLAGS: generated from the
//! one command table, plus the ACL categories, tips and key specs that
//! [`command_info`](super::command_info) holds, and the docs that
//! [`command_docs`](super::command_docs) holds, as Redis 7.0 answers them.

use bytes::Bytes;

use super::command_docs::{self, Arg, CommandDoc};
use super::command_info::{self, key_flags, BeginSearch, FindKeys, KeySpec};
use super::CmdResult;
use super::{cmd, flags::*, table, Args, CommandSpec, Ctx};
use crate::error::{self, CmdError};
use crate::numeric::int::parse_i64;
use crate::protocol::Reply;

#[rustfmt::skip]
pub const SUBCOMMANDS: &[CommandSpec] = &[
    cmd("command|count", 2, LOADING | STALE, 0, 0, 0, "server", "2.8.13", "Returns a count of commands.", command_count),
    cmd("command|info", -2, LOADING | STALE, 0, 0, 0, "server", "2.8.13", "Returns information about one, multiple or all commands.", command_info),
    cmd("command|docs", -2, LOADING | STALE, 0, 0, 0, "server", "7.0.0", "Returns documentary information about one, multiple or all commands.", command_docs),
    cmd("command|list", -2, LOADING | STALE, 0, 0, 0, "server", "7.0.0", "Returns a list of command names.", command_list),
    cmd("command|getkeys", -4, LOADING | STALE, 0, 0, 0, "server", "2.8.13", "Extracts the key names from an arbitrary command.", command_getkeys),
    cmd("command|getkeysandflags", -4, LOADING | STALE, 0, 0, 0, "server", "7.0.0", "Extracts the key names and access flags for an arbitrary command.", command_getkeysandflags),
    cmd("command|help", 2, LOADING | STALE, 0, 0, 0, "server", "5.0.0", "Returns helpful text about the different subcommands.", command_help),
];

// ---------------------------------------------------------------------------------------------
// COMMAND
// ---------------------------------------------------------------------------------------------

fn flag_replies(spec: &CommandSpec) -> Reply {
    Reply::Set(
        super::flags::NAMES
            .iter()
            .filter(|(f, _)| spec.flags & f != 0)
            .map(|(_, n)| Reply::Status(n))
            .collect(),
    )
}

/// A static text as a bulk string, without copying it.
fn static_bulk(text: &'static str) -> Reply {
    Reply::Bulk(Bytes::from_static(text.as_bytes()))
}

/// Key-spec flags as Redis lists them: a set of status replies.
fn key_flag_replies(flags: u16) -> Reply {
    Reply::Set(
        key_flags::NAMES
            .iter()
            .filter(|(f, _)| flags & f != 0)
            .map(|(_, n)| Reply::Status(n))
            .collect(),
    )
}

/// `type` and `spec` of a key spec's begin_search or find_keys, as Redis's
/// addReplyCommandKeySpecs writes them.
fn typed_spec(kind: &'static str, fields: Vec<(&'static str, Reply)>) -> Reply {
    Reply::Map(vec![
        (static_bulk("type"), static_bulk(kind)),
        (
            static_bulk("spec"),
            Reply::Map(
                fields
                    .into_iter()
                    .map(|(k, v)| (static_bulk(k), v))
                    .collect(),
            ),
        ),
    ])
}

fn key_spec_reply(spec: &KeySpec) -> Reply {
    let mut fields = Vec::with_capacity(4);
    if let Some(notes) = spec.notes {
        fields.push((static_bulk("notes"), static_bulk(notes)));
    }
    fields.push((static_bulk("flags"), key_flag_replies(spec.flags)));
    let begin_search = match spec.begin_search {
        BeginSearch::Index(index) => typed_spec("index", vec![("index", Reply::Int(index.into()))]),
        BeginSearch::Keyword { keyword, startfrom } => typed_spec(
            "keyword",
            vec![
                ("keyword", static_bulk(keyword)),
                ("startfrom", Reply::Int(startfrom.into())),
            ],
        ),
        BeginSearch::Unknown => typed_spec("unknown", vec![]),
    };
    fields.push((static_bulk("begin_search"), begin_search));
    let find_keys = match spec.find_keys {
        FindKeys::Range {
            lastkey,
            keystep,
            limit,
        } => typed_spec(
            "range",
            vec![
                ("lastkey", Reply::Int(lastkey.into())),
                ("keystep", Reply::Int(keystep.into())),
                ("limit", Reply::Int(limit.into())),
            ],
        ),
        FindKeys::Keynum {
            keynumidx,
            firstkey,
            keystep,
        } => typed_spec(
            "keynum",
            vec![
                ("keynumidx", Reply::Int(keynumidx.into())),
                ("firstkey", Reply::Int(firstkey.into())),
                ("keystep", Reply::Int(keystep.into())),
            ],
        ),
        FindKeys::Unknown => typed_spec("unknown", vec![]),
    };
    fields.push((static_bulk("find_keys"), find_keys));
    Reply::Map(fields)
}

/// A command's ACL categories, tips and key specs.
type Facts = (
    &'static [&'static str],
    &'static [&'static str],
    &'static [KeySpec],
);

/// The facts of the command registered as `name`; none for a name [`command_info`] lacks (a test
/// keeps every command of the table there).
fn facts(name: &str) -> Facts {
    command_info::lookup(name).map_or((&[], &[], &[]), |&(_, categories, tips, specs)| {
        (categories, tips, specs)
    })
}

/// A command's COMMAND INFO entry: Redis 7.0's ten elements, with its RESP3 types (categories,
/// tips and key specs are sets, each key spec a map).
fn command_entry(spec: &CommandSpec) -> Reply {
    let (categories, tips, key_specs) = facts(spec.name);
    Reply::Array(vec![
        Reply::bulk_str(spec.name),
        Reply::Int(spec.arity as i64),
        flag_replies(spec),
        Reply::Int(spec.first_key as i64),
        Reply::Int(spec.last_key as i64),
        Reply::Int(spec.step as i64),
        Reply::Set(categories.iter().map(|c| Reply::Status(c)).collect()),
        Reply::Set(tips.iter().map(|t| static_bulk(t)).collect()),
        Reply::Set(key_specs.iter().map(key_spec_reply).collect()),
        // Redis's addReplyCommandSubCommands: an empty set for a command without subcommands.
        if spec.subcommands.is_empty() {
            Reply::Set(vec![])
        } else {
            Reply::Array(spec.subcommands.iter().map(command_entry).collect())
        },
    ])
}

fn command_count(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(table().listed().count() as i64))
}

pub(super) fn command_root(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(command_all())
}

/// Every command's COMMAND INFO entry.
pub fn command_all() -> Reply {
    Reply::Array(table().listed().map(command_entry).collect())
}

/// A command or `container|sub` by name, as COMMAND INFO and COMMAND DOCS accept them.
fn find_command(name: &[u8]) -> Option<&'static CommandSpec> {
    if let Some(bar) = name.iter().position(|&c| c == b'|') {
        let (_, container) = table().get(&name[..bar])?;
        return super::find_subcommand(container, &name[bar + 1..]);
    }
    table().get(name).map(|(_, s)| s)
}

fn command_info(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() == 2 {
        return Ok(command_all());
    }
    Ok(Reply::Array(
        argv[2..]
            .iter()
            .map(|n| match find_command(n) {
                Some(s) => command_entry(s),
                // Redis 7.0 answers a null bulk here (`_` in RESP3), not a null array.
                None => Reply::Null,
            })
            .collect(),
    ))
}

/// The docs of `spec`: Redis 7.0's from [`command_docs`]; for a command 7.0 lacks (CLIENT
/// SETINFO and NO-TOUCH), the summary, since and group of the command table. A module command
/// answers the table's summary and since, group `module` and module `bf`: RedisBloom 2.6
/// registers no docs (Redis then answers only the group and the module), but its current line
/// does (`RedisModule_SetCommandInfo`: summary, since, complexity, arguments), and where the two
/// lines differ hyperbloom follows the current one, as far as the table holds it.
fn docs_of(spec: &CommandSpec) -> CommandDoc {
    if spec.has(MODULE) {
        return CommandDoc {
            module: Some("bf"),
            ..command_docs::doc(spec.name, spec.summary, spec.since, "module")
        };
    }
    match command_docs::lookup(spec.name) {
        Some(doc) => *doc,
        None => command_docs::doc(spec.name, spec.summary, spec.since, spec.group),
    }
}

/// Doc or argument flags as COMMAND DOCS lists them: a set of status replies, in `names` order.
fn flag_set(flags: u8, names: &[(u8, &'static str)]) -> Reply {
    Reply::Set(
        names
            .iter()
            .filter(|(f, _)| flags & f != 0)
            .map(|(_, n)| Reply::Status(n))
            .collect(),
    )
}

/// Redis 7.0's addReplyCommandArgList: an array of maps, each argument's fields in its order.
fn arg_replies(args: &[Arg]) -> Reply {
    Reply::Array(
        args.iter()
            .map(|arg| {
                let mut fields = vec![
                    (static_bulk("name"), static_bulk(arg.name)),
                    (static_bulk("type"), static_bulk(arg.kind.name())),
                ];
                if let Some(index) = arg.key_spec_index {
                    fields.push((static_bulk("key_spec_index"), Reply::Int(index.into())));
                }
                for (field, value) in [
                    ("token", arg.token),
                    ("summary", arg.summary),
                    ("since", arg.since),
                    ("deprecated_since", arg.deprecated_since),
                ] {
                    if let Some(value) = value {
                        fields.push((static_bulk(field), static_bulk(value)));
                    }
                }
                if arg.flags != 0 {
                    fields.push((
                        static_bulk("flags"),
                        flag_set(arg.flags, command_docs::arg_flags::NAMES),
                    ));
                }
                if arg.kind.nests() {
                    fields.push((static_bulk("arguments"), arg_replies(arg.arguments)));
                }
                Reply::Map(fields)
            })
            .collect(),
    )
}

/// A command's COMMAND DOCS entry: Redis 7.0's addReplyCommandDocs, fields in its order and with
/// its RESP3 types (flags and history are sets, arguments an array of maps); the subcommands are
/// those of the table.
fn doc_entry(spec: &CommandSpec) -> Reply {
    let doc = docs_of(spec);
    let mut fields = Vec::with_capacity(11);
    for (field, value) in [("summary", doc.summary), ("since", doc.since)] {
        if let Some(value) = value {
            fields.push((static_bulk(field), static_bulk(value)));
        }
    }
    fields.push((static_bulk("group"), static_bulk(doc.group)));
    for (field, value) in [("complexity", doc.complexity), ("module", doc.module)] {
        if let Some(value) = value {
            fields.push((static_bulk(field), static_bulk(value)));
        }
    }
    if doc.flags != 0 {
        fields.push((
            static_bulk("doc_flags"),
            flag_set(doc.flags, command_docs::doc_flags::NAMES),
        ));
    }
    for (field, value) in [
        ("deprecated_since", doc.deprecated_since),
        ("replaced_by", doc.replaced_by),
    ] {
        if let Some(value) = value {
            fields.push((static_bulk(field), static_bulk(value)));
        }
    }
    if !doc.history.is_empty() {
        fields.push((
            static_bulk("history"),
            Reply::Set(
                doc.history
                    .iter()
                    .map(|(version, change)| {
                        Reply::Array(vec![static_bulk(version), static_bulk(change)])
                    })
                    .collect(),
            ),
        ));
    }
    if !doc.arguments.is_empty() {
        fields.push((static_bulk("arguments"), arg_replies(doc.arguments)));
    }
    if !spec.subcommands.is_empty() {
        fields.push((
            static_bulk("subcommands"),
            Reply::Map(
                spec.subcommands
                    .iter()
                    .map(|s| (static_bulk(s.name), doc_entry(s)))
                    .collect(),
            ),
        ));
    }
    Reply::Map(fields)
}

fn command_docs(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let specs: Vec<&CommandSpec> = if argv.len() == 2 {
        table().listed().collect()
    } else {
        argv[2..].iter().filter_map(|n| find_command(n)).collect()
    };
    Ok(Reply::Map(
        specs
            .into_iter()
            .map(|s| (static_bulk(s.name), doc_entry(s)))
            .collect(),
    ))
}

fn command_list(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut args = Args::skipping(argv, 2);
    let mut pattern: Option<&Bytes> = None;
    if args.eat("FILTERBY") {
        if args.eat("PATTERN") {
            pattern = Some(args.next_bytes()?);
        } else {
            return Err(CmdError::Static(error::SYNTAX));
        }
    }
    args.finish()?;
    Ok(Reply::Array(
        table()
            .listed()
            .filter(|s| pattern.is_none_or(|p| crate::glob::matches(p, s.name.as_bytes(), true)))
            .map(|s| Reply::bulk_str(s.name))
            .collect(),
    ))
}

// ---------------------------------------------------------------------------------------------
// COMMAND GETKEYS / GETKEYSANDFLAGS
// ---------------------------------------------------------------------------------------------

/// A key found in a command: its argument's position and its key-spec flags ([`key_flags`]).
type KeyPosition = (usize, u16);

/// A command's own key finder (Redis's `getkeys_proc`), which Redis uses when the key specs
/// cannot say (they are marked `variable_flags` or `incomplete`, or are unknown).
type KeysProc = fn(&[Bytes]) -> Vec<KeyPosition>;

/// The key finder of the command registered as `name`: of the commands hyperbloom has, only SET
/// has one.
fn keys_proc(name: &str) -> Option<KeysProc> {
    match name {
        "set" => Some(set_keys),
        _ => None,
    }
}

/// An argument as C's string functions see it: up to its first NUL.
fn c_str(arg: &[u8]) -> &[u8] {
    arg.iter()
        .position(|&b| b == 0)
        .map_or(arg, |end| &arg[..end])
}

/// Redis's setGetKeys: SET's key is read as well as written only when a `GET` option follows the
/// value (the spec's `variable_flags`).
fn set_keys(argv: &[Bytes]) -> Vec<KeyPosition> {
    use key_flags::*;
    let get = argv
        .iter()
        .skip(3)
        .any(|a| c_str(a).eq_ignore_ascii_case(b"get"));
    vec![(
        1,
        if get {
            RW | ACCESS | UPDATE
        } else {
            OW | UPDATE
        },
    )]
}

/// Where a keyword begin_search finds its keyword: Redis's getKeysUsingKeySpecs walks from
/// `startfrom` (from the end when negative) towards the end (the start), stopping before the last
/// argument (before the first argument after the name), and compares as `strcasecmp` does.
fn keyword_position(argv: &[Bytes], keyword: &str, startfrom: i32) -> Option<i64> {
    let argc = argv.len() as i64;
    let startfrom = i64::from(startfrom);
    let (start, end) = if startfrom > 0 {
        (startfrom, argc - 1)
    } else {
        (argc + startfrom, 1)
    };
    let step = if start <= end { 1 } else { -1 };
    let mut i = start;
    while i != end {
        let arg = usize::try_from(i)
            .ok()
            .filter(|&i| i >= 1)
            .and_then(|i| argv.get(i))?;
        if c_str(arg).eq_ignore_ascii_case(keyword.as_bytes()) {
            return Some(i);
        }
        i += step;
    }
    None
}

/// Redis 7.0's getKeysUsingKeySpecs: the keys `specs` find in `argv` (the command's name first),
/// or `None` where Redis gives up on the specs (an unknown or incomplete spec, a position out of
/// the arguments, a bad key count). A keyword spec whose keyword is absent finds no keys.
fn keys_from_specs(specs: &[KeySpec], argv: &[Bytes]) -> Option<Vec<KeyPosition>> {
    let argc = argv.len() as i64;
    let mut keys = Vec::new();
    for spec in specs {
        // Channels of the sharded pub/sub commands, not keys.
        if spec.flags & key_flags::NOT_KEY != 0 {
            continue;
        }
        let first = match spec.begin_search {
            BeginSearch::Index(index) => i64::from(index),
            BeginSearch::Keyword { keyword, startfrom } => {
                match keyword_position(argv, keyword, startfrom) {
                    Some(at) => at + 1,
                    None => continue,
                }
            }
            BeginSearch::Unknown => return None,
        };
        let (first, last, step) = match spec.find_keys {
            FindKeys::Range {
                lastkey,
                keystep,
                limit,
            } => {
                let lastkey = i64::from(lastkey);
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / i64::from(limit) + lastkey)
                };
                (first, last, keystep)
            }
            FindKeys::Keynum {
                keynumidx,
                firstkey,
                keystep,
            } => {
                let count = usize::try_from(first + i64::from(keynumidx))
                    .ok()
                    .and_then(|at| argv.get(at))
                    .and_then(|a| parse_i64(a))
                    .filter(|&n| n >= 0)?;
                let first = first + i64::from(firstkey);
                // Redis keeps the count in an `int`.
                (first, first + i64::from(count as i32) - 1, keystep)
            }
            FindKeys::Unknown => return None,
        };
        if first < 1 || last >= argc || last < first {
            return None;
        }
        let step = usize::try_from(step).unwrap_or(1).max(1);
        keys.extend(
            (first..=last)
                .step_by(step)
                .map(|at| (at as usize, spec.flags)),
        );
        if spec.flags & key_flags::INCOMPLETE != 0 {
            return None;
        }
    }
    Some(keys)
}

/// The keys of the full command `argv` with their flags, or Redis 7.0's error for it
/// (getKeysSubcommandImpl's checks in its order: the command, whether it takes keys, its arity,
/// then the keys themselves).
fn command_keys(argv: &[Bytes]) -> Result<Vec<(&Bytes, u16)>, CmdError> {
    let spec = argv
        .first()
        .and_then(|name| table().get(name))
        .map(|(_, s)| s);
    // Redis's lookupCommand: with arguments after a container's name, its subcommand.
    let spec = match (spec, argv.get(1)) {
        (Some(s), Some(sub)) if !s.subcommands.is_empty() => super::find_subcommand(s, sub),
        (s, _) => s,
    }
    .ok_or(CmdError::Static(error::GETKEYS_INVALID_COMMAND))?;
    let (_, _, specs) = facts(spec.name);
    let proc_keys = keys_proc(spec.name);
    let has_key_spec = specs.iter().any(|s| s.flags & key_flags::NOT_KEY == 0);
    if !has_key_spec && proc_keys.is_none() {
        return Err(CmdError::Static(error::GETKEYS_NO_KEYS));
    }
    if !spec.arity_ok(argv.len()) {
        return Err(CmdError::Static(error::GETKEYS_ARITY));
    }
    // Specs with variable flags cannot say how a key is accessed: the command's function does.
    let variable = specs
        .iter()
        .any(|s| s.flags & key_flags::VARIABLE_FLAGS != 0);
    let keys = (has_key_spec && !variable)
        .then(|| keys_from_specs(specs, argv))
        .flatten()
        .or_else(|| proc_keys.map(|keys| keys(argv)))
        .unwrap_or_default();
    // Redis answers an empty array instead for a command flagged `no_mandatory_keys` (EVAL and
    // the like); hyperbloom has none.
    if keys.is_empty() {
        return Err(CmdError::Static(error::GETKEYS_INVALID_ARGUMENTS));
    }
    Ok(keys
        .into_iter()
        .filter_map(|(at, flags)| argv.get(at).map(|key| (key, flags)))
        .collect())
}

/// `COMMAND GETKEYS command [arg ...]`: the command's keys, an array of bulk strings.
fn command_getkeys(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let keys = command_keys(argv.get(2..).unwrap_or_default())?;
    Ok(Reply::Array(
        keys.into_iter()
            .map(|(key, _)| Reply::Bulk(key.clone()))
            .collect(),
    ))
}

/// `COMMAND GETKEYSANDFLAGS command [arg ...]`: an array of `[key, flags]` pairs, the flags a
/// set of status replies.
fn command_getkeysandflags(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let keys = command_keys(argv.get(2..).unwrap_or_default())?;
    Ok(Reply::Array(
        keys.into_iter()
            .map(|(key, flags)| {
                Reply::Array(vec![Reply::Bulk(key.clone()), key_flag_replies(flags)])
            })
            .collect(),
    ))
}

/// `COMMAND HELP`, Redis 7.0.15's text.
const COMMAND_HELP: &[&str] = &[
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
    "HELP",
    "    Prints this help.",
];

fn command_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    super::help_reply(COMMAND_HELP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use key_flags::*;

    fn argv(args: &[&str]) -> Vec<Bytes> {
        args.iter()
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect()
    }

    /// The keys and flags GETKEYSANDFLAGS would answer for `args`, or its error.
    fn keys(args: &[&str]) -> Result<Vec<(String, u16)>, String> {
        let argv = argv(args);
        command_keys(&argv)
            .map(|keys| {
                keys.into_iter()
                    .map(|(k, f)| (String::from_utf8_lossy(k).into_owned(), f))
                    .collect()
            })
            .map_err(|e| e.to_string())
    }

    fn positions(specs: &[KeySpec], args: &[&str]) -> Option<Vec<KeyPosition>> {
        keys_from_specs(specs, &argv(args))
    }

    fn every_command() -> Vec<&'static CommandSpec> {
        table()
            .all()
            .iter()
            .flat_map(|s| std::iter::once(*s).chain(s.subcommands.iter()))
            .collect()
    }

    #[test]
    fn every_command_has_its_facts_and_every_fact_a_command() {
        let commands = every_command();
        for spec in &commands {
            assert!(
                command_info::lookup(spec.name).is_some(),
                "{} is not in command_info.rs: run scripts/gen_command_info.py",
                spec.name
            );
        }
        for (name, ..) in command_info::COMMANDS {
            assert!(
                commands.iter().any(|s| s.name == *name),
                "command_info.rs has {name}, which the table has not"
            );
        }
    }

    /// The commands hyperbloom has from Redis 7.2, which 7.0 has no docs for.
    const NEWER_THAN_7_0: &[&str] = &["client|no-touch", "client|setinfo"];

    #[test]
    fn every_command_has_its_docs_and_every_doc_a_command() {
        let commands = every_command();
        let mut undocumented: Vec<&str> = commands
            .iter()
            .filter(|s| command_docs::lookup(s.name).is_none())
            .map(|s| s.name)
            .collect();
        undocumented.sort_unstable();
        assert_eq!(
            undocumented, NEWER_THAN_7_0,
            "commands without docs: run scripts/gen_command_docs.py"
        );
        for doc in command_docs::DOCS {
            assert!(
                commands.iter().any(|s| s.name == doc.name),
                "command_docs.rs has {}, which the table has not",
                doc.name
            );
        }
        for pair in command_docs::DOCS.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} before {}",
                pair[0].name,
                pair[1].name
            );
        }
    }

    fn docs_bytes(name: &[u8], proto: u8) -> String {
        let spec = find_command(name).expect("a command");
        String::from_utf8_lossy(&doc_entry(spec).to_bytes(proto)).into_owned()
    }

    /// COMMAND DOCS getex's entry as redis-server 7.0.15 answers it: nested arguments, a key
    /// spec index, tokens, flags as a set.
    #[test]
    fn getex_docs_are_redis_bytes() {
        let token = |name: &str, kind: &str, token: &str| {
            format!(
                "$4\r\nname\r\n${}\r\n{name}\r\n$4\r\ntype\r\n${}\r\n{kind}\r\n\
                 $5\r\ntoken\r\n${}\r\n{token}\r\n",
                name.len(),
                kind.len(),
                token.len()
            )
        };
        let expirations = [
            token("seconds", "integer", "EX"),
            token("milliseconds", "integer", "PX"),
            token("unix-time-seconds", "unix-time", "EXAT"),
            token("unix-time-milliseconds", "unix-time", "PXAT"),
            token("persist", "pure-token", "PERSIST"),
        ];
        let head = "$7\r\nsummary\r\n$56\r\nGet the value of a key and optionally set its \
            expiration\r\n$5\r\nsince\r\n$5\r\n6.2.0\r\n$5\r\ngroup\r\n$6\r\nstring\r\n\
            $10\r\ncomplexity\r\n$4\r\nO(1)\r\n$9\r\narguments\r\n*2\r\n";
        let key = "$4\r\nname\r\n$3\r\nkey\r\n$4\r\ntype\r\n$3\r\nkey\r\n\
            $14\r\nkey_spec_index\r\n:0\r\n";
        let expiration = "$4\r\nname\r\n$10\r\nexpiration\r\n$4\r\ntype\r\n$5\r\noneof\r\n\
            $5\r\nflags\r\n";
        let resp3 = format!(
            "%5\r\n{head}%3\r\n{key}%4\r\n{expiration}~1\r\n+optional\r\n\
             $9\r\narguments\r\n*5\r\n{}",
            expirations
                .iter()
                .map(|e| format!("%3\r\n{e}"))
                .collect::<String>()
        );
        let resp2 = format!(
            "*10\r\n{head}*6\r\n{key}*8\r\n{expiration}*1\r\n+optional\r\n\
             $9\r\narguments\r\n*5\r\n{}",
            expirations
                .iter()
                .map(|e| format!("*6\r\n{e}"))
                .collect::<String>()
        );
        assert_eq!(docs_bytes(b"getex", 3), resp3);
        assert_eq!(docs_bytes(b"GETEX", 2), resp2);
    }

    /// Module commands: the table's summary and since, group `module`, module `bf` (RedisBloom's
    /// current line documents its commands; 2.6.12, which registers no docs, answers only the
    /// group and the module: `%2 group module module bf`).
    #[test]
    fn module_docs_are_the_tables_summary_and_since() {
        assert_eq!(
            docs_bytes(b"bf.add", 3),
            format!(
                "%4\r\n$7\r\nsummary\r\n${}\r\n{}\r\n$5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$6\r\nmodule\r\n$6\r\nmodule\r\n$2\r\nbf\r\n",
                find_command(b"bf.add").unwrap().summary.len(),
                find_command(b"bf.add").unwrap().summary
            )
        );
        for spec in every_command().into_iter().filter(|s| s.has(MODULE)) {
            let doc = docs_of(spec);
            assert_eq!(
                (doc.group, doc.module, doc.summary, doc.arguments.len()),
                ("module", Some("bf"), Some(spec.summary), 0),
                "{}",
                spec.name
            );
        }
    }

    /// CLIENT SETINFO and NO-TOUCH (Redis 7.2's) keep the summary, since and group of the table.
    #[test]
    fn commands_newer_than_7_0_answer_the_table() {
        for name in NEWER_THAN_7_0 {
            let spec = find_command(name.as_bytes()).expect(name);
            let doc = docs_of(spec);
            assert_eq!(
                (doc.summary, doc.since, doc.group),
                (Some(spec.summary), Some(spec.since), spec.group)
            );
            assert!(doc.arguments.is_empty() && doc.complexity.is_none());
        }
        // And appear among CLIENT's subcommands.
        let client = docs_bytes(b"client", 3);
        assert!(client.contains("$14\r\nclient|setinfo\r\n%3\r\n$7\r\nsummary\r\n"));
    }

    #[test]
    fn facts_are_sorted_for_the_binary_search() {
        for pair in command_info::COMMANDS.windows(2) {
            assert!(pair[0].0 < pair[1].0, "{} before {}", pair[0].0, pair[1].0);
        }
    }

    /// What redis-server 7.0.15 answers with RedisBloom 2.6.12 loaded (no tips, and the key spec
    /// Redis derives from a module's first/last/step: 1, 1, 1), with the current line's ACL
    /// categories (2.6 declares none): @write or @read as the command's flag, @fast on the
    /// creation and INFO-like commands, then the family's own category, and never an implicit
    /// @slow, which Redis adds only to core commands.
    #[test]
    fn module_commands_answer_what_redis_derives_for_redisbloom() {
        const LEGACY: KeySpec = KeySpec {
            notes: None,
            flags: RW | ACCESS | UPDATE,
            begin_search: BeginSearch::Index(1),
            find_keys: FindKeys::Range {
                lastkey: 0,
                keystep: 1,
                limit: 0,
            },
        };
        let modules: Vec<_> = every_command()
            .into_iter()
            .filter(|s| s.has(MODULE))
            .collect();
        assert!(modules.len() > 40, "{}", modules.len());
        for spec in modules {
            let (categories, tips, key_specs) = facts(spec.name);
            let empty: &[&str] = &[];
            assert_eq!((tips, key_specs), (empty, &[LEGACY][..]), "{}", spec.name);
            let family = match spec.name.split('.').next() {
                Some("bf") => "@bloom".to_string(),
                Some("cf") => "@cuckoo".to_string(),
                other => format!("@{}", other.unwrap_or_default()),
            };
            let access = if spec.has(WRITE) { "@write" } else { "@read" };
            let fast = [
                "bf.reserve",
                "bf.info",
                "bf.card",
                "cf.reserve",
                "cf.info",
                "cms.initbydim",
                "cms.initbyprob",
                "cms.info",
                "topk.reserve",
                "topk.info",
                "tdigest.create",
                "tdigest.reset",
                "tdigest.info",
            ]
            .contains(&spec.name)
                || (spec.name.starts_with("tdigest.")
                    && spec.has(READONLY)
                    && spec.name != "tdigest.trimmed_mean");
            let expected: Vec<&str> = if fast {
                vec![access, "@fast", &family]
            } else {
                vec![access, &family]
            };
            assert_eq!(categories, &expected[..], "{}", spec.name);
        }
        // COMMAND INFO bf.add's elements 7 to 10 there, in RESP3 and RESP2.
        let spec = table().get(b"bf.add").map(|(_, s)| s).expect("bf.add");
        let tail3 = "~2\r\n+@write\r\n+@bloom\r\n~0\r\n~1\r\n%3\r\n$5\r\nflags\r\n~3\r\n+RW\r\n+access\r\n+update\r\n\
            $12\r\nbegin_search\r\n%2\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n%1\r\n\
            $5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n%2\r\n$4\r\ntype\r\n$5\r\nrange\r\n\
            $4\r\nspec\r\n%3\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n\
            ~0\r\n";
        let tail2 = "*2\r\n+@write\r\n+@bloom\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*3\r\n+RW\r\n+access\r\n+update\r\n\
            $12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n\
            $5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n\
            $4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n\
            *0\r\n";
        for (proto, tail) in [(3, tail3), (2, tail2)] {
            let entry = command_entry(spec).to_bytes(proto);
            let text = String::from_utf8_lossy(&entry);
            assert!(text.ends_with(tail), "RESP{proto}: {text}");
        }
        assert_eq!(
            keys(&["bf.add", "k", "v"]),
            Ok(vec![("k".into(), RW | ACCESS | UPDATE)])
        );
    }

    /// COMMAND INFO get as redis-server 7.0.15 answers it in RESP3.
    #[test]
    fn get_entry_is_redis_bytes() {
        let spec = table().get(b"get").map(|(_, s)| s).expect("get");
        let expected = "*10\r\n$3\r\nget\r\n:2\r\n~2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n\
            ~3\r\n+@read\r\n+@string\r\n+@fast\r\n~0\r\n~1\r\n%3\r\n$5\r\nflags\r\n~2\r\n+RO\r\n\
            +access\r\n$12\r\nbegin_search\r\n%2\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n\
            %1\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n%2\r\n$4\r\ntype\r\n$5\r\nrange\r\n\
            $4\r\nspec\r\n%3\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n\
            ~0\r\n";
        assert_eq!(
            String::from_utf8_lossy(&command_entry(spec).to_bytes(3)),
            expected
        );
    }

    #[test]
    fn getkeys_from_index_and_range_specs() {
        assert_eq!(keys(&["GET", "k"]), Ok(vec![("k".into(), RO | ACCESS)]));
        // MSET: every second argument from the first to the last.
        let mset = keys(&["mset", "a", "1", "b", "2"]).expect("mset");
        let names: Vec<&str> = mset.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(mset.iter().all(|&(_, f)| f == OW | UPDATE));
        // COPY: two specs, two kinds of access.
        assert_eq!(
            keys(&["copy", "a", "b", "DB", "1"]),
            Ok(vec![("a".into(), RO | ACCESS), ("b".into(), OW | UPDATE)])
        );
        // A subcommand's keys.
        assert_eq!(
            keys(&["object", "encoding", "k"]),
            Ok(vec![("k".into(), RO)])
        );
    }

    #[test]
    fn set_keys_come_from_its_own_function() {
        assert_eq!(
            keys(&["set", "k", "v"]),
            Ok(vec![("k".into(), OW | UPDATE)])
        );
        let read_too = Ok(vec![("k".into(), RW | ACCESS | UPDATE)]);
        assert_eq!(keys(&["set", "k", "v", "EX", "10", "get"]), read_too);
        assert_eq!(keys(&["set", "k", "v", "get\0x"]), read_too);
        // The value is never an option.
        assert_eq!(
            keys(&["set", "k", "get"]),
            Ok(vec![("k".into(), OW | UPDATE)])
        );
    }

    #[test]
    fn getkeys_errors_in_redis_order() {
        assert_eq!(
            keys(&["nosuch", "k"]),
            Err(error::GETKEYS_INVALID_COMMAND.into())
        );
        assert_eq!(
            keys(&["config", "nosuch"]),
            Err(error::GETKEYS_INVALID_COMMAND.into())
        );
        // No keys is said before a wrong arity.
        assert_eq!(keys(&["config", "get"]), Err(error::GETKEYS_NO_KEYS.into()));
        assert_eq!(keys(&["ping", "x"]), Err(error::GETKEYS_NO_KEYS.into()));
        // Channels are not keys.
        assert_eq!(
            keys(&["spublish", "ch", "m"]),
            Err(error::GETKEYS_NO_KEYS.into())
        );
        assert_eq!(keys(&["get", "a", "b"]), Err(error::GETKEYS_ARITY.into()));
        assert_eq!(keys(&["get"]), Err(error::GETKEYS_ARITY.into()));
        assert_eq!(
            keys(&["command|info"]),
            Err(error::GETKEYS_INVALID_COMMAND.into())
        );
    }

    #[test]
    fn keynum_specs_count_their_keys() {
        // ZUNIONSTORE's: a destination, then a count and that many sources.
        let specs = [
            command_info::KeySpec {
                notes: None,
                flags: OW | UPDATE,
                begin_search: BeginSearch::Index(1),
                find_keys: FindKeys::Range {
                    lastkey: 0,
                    keystep: 1,
                    limit: 0,
                },
            },
            command_info::KeySpec {
                notes: None,
                flags: RO | ACCESS,
                begin_search: BeginSearch::Index(2),
                find_keys: FindKeys::Keynum {
                    keynumidx: 0,
                    firstkey: 1,
                    keystep: 1,
                },
            },
        ];
        let z = ["zunionstore", "d", "2", "a", "b", "WEIGHTS", "1", "2"];
        assert_eq!(
            positions(&specs, &z),
            Some(vec![(1, OW | UPDATE), (3, RO | ACCESS), (4, RO | ACCESS)])
        );
        // More keys than arguments, a count that is no count, no keys at all: Redis gives up.
        for bad in ["3", "x", "-1", "+1", "0"] {
            let z = ["zunionstore", "d", bad, "a", "b"];
            assert_eq!(positions(&specs, &z), None, "{bad}");
        }
        // The count itself missing.
        assert_eq!(positions(&specs[1..], &["zunion"]), None);
    }

    #[test]
    fn keyword_specs_search_for_their_keyword() {
        // XREAD's: after STREAMS, half of the rest.
        let xread = [command_info::KeySpec {
            notes: None,
            flags: RO | ACCESS,
            begin_search: BeginSearch::Keyword {
                keyword: "STREAMS",
                startfrom: 1,
            },
            find_keys: FindKeys::Range {
                lastkey: -1,
                keystep: 1,
                limit: 2,
            },
        }];
        let args = ["xread", "COUNT", "2", "streams", "a", "b", "0", "0"];
        assert_eq!(
            positions(&xread, &args),
            Some(vec![(4, RO | ACCESS), (5, RO | ACCESS)])
        );
        // No keyword: no keys from this spec (the caller then answers its error).
        assert_eq!(positions(&xread, &["xread", "COUNT", "2"]), Some(vec![]));
        // The last argument is never taken for the keyword: no key could follow it.
        assert_eq!(positions(&xread, &["xread", "a", "STREAMS"]), Some(vec![]));
        // MIGRATE's KEYS, searched backwards from the second last argument, not down to
        // argument 1.
        let migrate = argv(&["migrate", "h", "p", "", "0", "5", "KEYS", "a", "b"]);
        assert_eq!(keyword_position(&migrate, "keys", -2), Some(6));
        assert_eq!(
            keyword_position(&argv(&["x", "KEYS", "a"]), "KEYS", -1),
            None
        );
        // An incomplete spec: Redis leaves the keys to the command's own function.
        let incomplete = [command_info::KeySpec {
            flags: RW | ACCESS | DELETE | INCOMPLETE,
            begin_search: BeginSearch::Keyword {
                keyword: "KEYS",
                startfrom: -2,
            },
            ..xread[0]
        }];
        let migrate: Vec<&str> = ["migrate", "h", "p", "", "0", "5", "KEYS", "a", "b"].to_vec();
        assert_eq!(positions(&incomplete, &migrate), None);
        // Unknown specs (SORT's BY/GET/STORE) likewise.
        let unknown = [command_info::KeySpec {
            begin_search: BeginSearch::Unknown,
            find_keys: FindKeys::Unknown,
            ..xread[0]
        }];
        assert_eq!(positions(&unknown, &["sort", "k"]), None);
    }
}
