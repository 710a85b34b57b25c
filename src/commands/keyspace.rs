//! Keyspace commands: DEL, EXISTS, TYPE (more to come: see the keyspace issue).

use bytes::Bytes;

use super::{cmd, flags::*, CommandSpec, Ctx};
use crate::error::CmdResult;
use crate::protocol::Reply;

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("del", -2, WRITE, 1, -1, 1, "generic", "1.0.0", "Deletes one or more keys.", del),
    cmd("exists", -2, READONLY | FAST, 1, -1, 1, "generic", "1.0.0", "Determines whether one or more keys exist.", exists),
    cmd("type", 2, READONLY | FAST, 1, 1, 1, "generic", "1.0.0", "Determines the type of value stored at a key.", type_cmd),
];

fn del(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let db = ctx.db();
    Ok(Reply::Int(
        argv[1..].iter().filter(|k| db.delete(k)).count() as i64,
    ))
}

fn exists(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let db = ctx.db();
    Ok(Reply::Int(
        argv[1..].iter().filter(|k| db.contains(k)).count() as i64,
    ))
}

fn type_cmd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Status(match ctx.db().lookup(&argv[1]) {
        Some(v) => v.type_name(),
        None => "none",
    }))
}
