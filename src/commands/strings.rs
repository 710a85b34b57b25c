//! String commands: GET, SET (more to come: see the strings issue).

use bytes::Bytes;

use super::{cmd, flags::*, CommandSpec, Ctx};
use crate::error::{self, CmdError, CmdResult};
use crate::protocol::Reply;
use crate::store::Value;

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("get", 2, READONLY | FAST, 1, 1, 1, "string", "1.0.0", "Returns the string value of a key.", get),
    cmd("set", -3, WRITE | DENYOOM, 1, 1, 1, "string", "1.0.0", "Sets the string value of a key, ignoring its type.", set),
];

fn get(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    match ctx.db().lookup(&argv[1]) {
        None => Ok(Reply::Null),
        Some(Value::Str(s)) => Ok(Reply::Bulk(Bytes::copy_from_slice(s))),
        #[allow(unreachable_patterns)]
        Some(_) => Err(CmdError::Static(error::WRONGTYPE)),
    }
}

fn set(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() != 3 {
        return Err(CmdError::Static(error::SYNTAX));
    }
    ctx.db()
        .insert(argv[1].clone(), Value::Str(argv[2].to_vec()));
    Ok(Reply::ok())
}
