//! COMMAND, COMMAND COUNT / INFO / DOCS / LIST: generated from the one command table.

use bytes::Bytes;

use super::CmdResult;
use super::{cmd, flags::*, table, Args, CommandSpec, Ctx};
use crate::error::{self, CmdError};
use crate::protocol::Reply;

#[rustfmt::skip]
pub const SUBCOMMANDS: &[CommandSpec] = &[
    cmd("command|count", 2, LOADING | STALE, 0, 0, 0, "server", "2.8.13", "Returns a count of commands.", command_count),
    cmd("command|info", -2, LOADING | STALE, 0, 0, 0, "server", "2.8.13", "Returns information about one, multiple or all commands.", command_info),
    cmd("command|docs", -2, LOADING | STALE, 0, 0, 0, "server", "7.0.0", "Returns documentary information about one, multiple or all commands.", command_docs),
    cmd("command|list", -2, LOADING | STALE, 0, 0, 0, "server", "7.0.0", "Returns a list of command names.", command_list),
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

fn command_entry(spec: &CommandSpec) -> Reply {
    let display = spec.name;
    Reply::Array(vec![
        Reply::bulk_str(display),
        Reply::Int(spec.arity as i64),
        flag_replies(spec),
        Reply::Int(spec.first_key as i64),
        Reply::Int(spec.last_key as i64),
        Reply::Int(spec.step as i64),
        Reply::Set(vec![]),
        Reply::Array(vec![]),
        Reply::Array(vec![]),
        Reply::Array(spec.subcommands.iter().map(command_entry).collect()),
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

fn doc_entry(spec: &CommandSpec) -> Reply {
    let mut fields = vec![
        (Reply::bulk_str("summary"), Reply::bulk_str(spec.summary)),
        (Reply::bulk_str("since"), Reply::bulk_str(spec.since)),
        (
            Reply::bulk_str("group"),
            Reply::bulk_str(if spec.has(MODULE) {
                "module"
            } else {
                spec.group
            }),
        ),
    ];
    if spec.has(MODULE) {
        fields.push((Reply::bulk_str("module"), Reply::bulk_str("bf")));
    }
    if !spec.subcommands.is_empty() {
        fields.push((
            Reply::bulk_str("subcommands"),
            Reply::Map(
                spec.subcommands
                    .iter()
                    .map(|s| (Reply::bulk_str(s.name), doc_entry(s)))
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
            .map(|s| (Reply::bulk_str(s.name), doc_entry(s)))
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
