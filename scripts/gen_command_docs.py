#!/usr/bin/env python3
"""Generates src/commands/command_docs.rs: every command's COMMAND DOCS entry, as Redis 7.0 has it.

COMMAND DOCS answers a map per command (summary, since, group, complexity, doc flags, deprecation,
history, the nested argument maps, subcommands). All of it but the subcommands, which hyperbloom's
command table lists, is Redis's data; this script copies it from a real redis-server 7.0 rather
than by hand, the same way scripts/gen_command_info.py copies COMMAND INFO's facts (and with its
RESP client and server helpers):

  1. starts hyperbloom (the build of this tree) and reads its command names, subcommands included,
     from `COMMAND`;
  2. starts Debian's redis-server 7.0 twice, once plain (the core commands) and once with
     RedisBloom loaded (BF.*, CF.*, CMS.*, TOPK.*, TDIGEST.*: RedisBloom registers no docs, so
     Redis answers only their group and module);
  3. asks each for `COMMAND DOCS name` in RESP3, checks that every field, its order and its RESP
     type are ones this script knows how to reproduce, and writes the entries as static data
     sorted by name.

A command hyperbloom has but redis-server 7.0 lacks (CLIENT SETINFO and NO-TOUCH are 7.2's) gets
no entry: hyperbloom answers the summary, since and group of its command table for it. Any other
name without a reference is an error.

    scripts/gen_command_docs.py [--hyperbloom target/ci/hyperbloom]
                                [--redis-module target/refbloom/redisbloom.so]

Needs only python3's standard library. The servers listen on ports outside 12000-32000 (the
tests' range), default 7793-7795, and are stopped at the end.
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_command_info as info  # noqa: E402  (the RESP client and server helpers)

ROOT = info.ROOT
OUT = os.path.join(ROOT, "src", "commands", "command_docs.rs")

# Commands newer than redis-server 7.0: no docs to copy (gen_command_info.py's EXTRA names them).
NEWER_THAN_7_0 = set(info.EXTRA)

# The fields of a command's entry in the order Redis 7.0's addReplyCommandDocs writes them, with
# the RESP3 type of each value. `subcommands` is left out: hyperbloom's table lists them.
COMMAND_FIELDS = [
    ("summary", "$"),
    ("since", "$"),
    ("group", "$"),
    ("complexity", "$"),
    ("module", "$"),
    ("doc_flags", "~"),
    ("deprecated_since", "$"),
    ("replaced_by", "$"),
    ("history", "~"),
    ("arguments", "*"),
    ("subcommands", "%"),
]

# An argument's fields in addReplyCommandArgList's order.
ARG_FIELDS = [
    ("name", "$"),
    ("type", "$"),
    ("key_spec_index", ":"),
    ("token", "$"),
    ("summary", "$"),
    ("since", "$"),
    ("deprecated_since", "$"),
    ("flags", "~"),
    ("arguments", "*"),
]

# Redis's argument types, and the Rust variant of each.
ARG_TYPES = {
    "string": "String",
    "integer": "Integer",
    "double": "Double",
    "key": "Key",
    "pattern": "Pattern",
    "unix-time": "UnixTime",
    "pure-token": "PureToken",
    "oneof": "OneOf",
    "block": "Block",
}

# The types whose arguments have a constructor of their own name (`string("value")`).
PLAIN_TYPES = ("string", "integer", "double", "pattern", "unix-time")

# Flag names in the order Redis lists them; the Rust constant of each.
DOC_FLAGS = [("deprecated", "DEPRECATED"), ("syscmd", "SYSCMD")]
ARG_FLAGS = [("optional", "OPTIONAL"), ("multiple", "MULTIPLE"),
             ("multiple_token", "MULTIPLE_TOKEN")]


# ---------------------------------------------------------------------------------------------
# RESP, with its types
# ---------------------------------------------------------------------------------------------


class TypedConn(info.Conn):
    """A connection whose replies decode to (type byte, value): a set is not an array here, nor a
    status a bulk string, and the generated data must say which Redis sent."""

    def read(self):
        line = self._line()
        kind, rest = chr(line[0]), line[1:]
        if kind == "-":
            raise RuntimeError(rest.decode())
        if kind == "+":
            return kind, rest.decode()
        if kind == ":":
            return kind, int(rest)
        if kind == "_":
            return kind, None
        if kind in "$=":
            n = int(rest)
            return kind, None if n < 0 else self._exact(n).decode()
        if kind in "*~>":
            n = int(rest)
            return kind, None if n < 0 else [self.read() for _ in range(n)]
        if kind == "%":
            return kind, [(self.read(), self.read()) for _ in range(int(rest))]
        raise ValueError("unexpected reply %r" % line)


def fields_of(where, reply, known):
    """A map reply's fields as a dict of values, after checking each field is known, has its
    type, and comes in Redis's order."""
    kind, pairs = reply
    if kind != "%":
        sys.exit("%s: a map expected, got %r" % (where, reply))
    order = [name for name, _ in known]
    types = dict(known)
    fields = {}
    for (key_kind, key), (value_kind, value) in pairs:
        if key_kind != "$" or key not in types:
            sys.exit("%s: field %r is new to this script" % (where, key))
        if value_kind != types[key]:
            sys.exit("%s: field %s has RESP type %r, not %r" % (where, key, value_kind,
                                                               types[key]))
        fields[key] = value
    if list(fields) != sorted(fields, key=order.index):
        sys.exit("%s: fields %s not in Redis's order" % (where, list(fields)))
    return fields


def flag_names(where, items, known):
    """A set of status replies, checked against `known` (and its order); the Rust constants."""
    names = []
    for kind, name in items:
        if kind != "+" or name not in dict(known):
            sys.exit("%s: flag %r is new to this script" % (where, (kind, name)))
        names.append(name)
    order = [n for n, _ in known]
    if names != sorted(names, key=order.index):
        sys.exit("%s: flags %s not in Redis's order" % (where, names))
    return [dict(known)[n] for n in names]


def bulk_pair(where, item):
    """A history entry: an array of two bulk strings."""
    kind, pair = item
    if kind != "*" or len(pair) != 2 or any(k != "$" for k, _ in pair):
        sys.exit("%s: history entry %r is new to this script" % (where, item))
    return pair[0][1], pair[1][1]


# ---------------------------------------------------------------------------------------------
# Rust
# ---------------------------------------------------------------------------------------------

rust_str = info.rust_str


def rust_opt(value):
    return "None" if value is None else "Some(%s)" % rust_str(value)


def rust_arg(where, reply):
    fields = fields_of(where, reply, ARG_FIELDS)
    name, kind = fields["name"], fields["type"]
    where = "%s/%s" % (where, name)
    if kind not in ARG_TYPES:
        sys.exit("%s: argument type %r is new to this script" % (where, kind))
    nested = kind in ("oneof", "block")
    # Redis writes `arguments` for these two types and only for them.
    if nested != ("arguments" in fields):
        sys.exit("%s: a %s argument with%s nested arguments" % (where, kind,
                                                                "out" if nested else ""))
    index, token = fields.get("key_spec_index"), fields.get("token")
    if kind == "key" and index is not None:
        text, index = "key(%s, %d)" % (rust_str(name), index), None
    elif kind == "pure-token" and token is not None:
        text, token = "token(%s, %s)" % (rust_str(name), rust_str(token)), None
    elif nested:
        args = fields["arguments"]
        text = "%s(%s, &[%s])" % ("oneof" if kind == "oneof" else "block", rust_str(name),
                                  ", ".join(rust_arg(where, a) for a in args))
    elif kind in PLAIN_TYPES:
        text = "%s(%s)" % (kind.replace("-", "_"), rust_str(name))
    else:
        text = "arg(%s, ArgType::%s)" % (rust_str(name), ARG_TYPES[kind])
    if index is not None:
        text += ".key_spec(%d)" % index
    if token is not None:
        text += ".token(%s)" % rust_str(token)
    for field in ("summary", "since", "deprecated_since"):
        if field in fields:
            text += ".%s(%s)" % (field, rust_str(fields[field]))
    flags = flag_names(where, fields.get("flags", []), ARG_FLAGS)
    if flags:
        text += ".flags(%s)" % " | ".join(flags)
    return text


def rust_doc(name, reply):
    """One command's entry: its builder expression, top-level arguments one a line."""
    fields = fields_of(name, reply, COMMAND_FIELDS)
    if "module" in fields:
        unexpected = set(fields) - {"group", "module"}
        if unexpected or fields["group"] != "module":
            sys.exit("%s: module command with docs %s: new to this script" % (name, fields))
        return "    module_doc(%s, %s),\n" % (rust_str(name), rust_str(fields["module"]))
    for field in ("summary", "since"):
        if field not in fields:
            sys.exit("%s: core command without %s: new to this script" % (name, field))
    text = "    doc(%s, %s, %s, %s)" % (rust_str(name), rust_str(fields["summary"]),
                                        rust_str(fields["since"]), rust_str(fields["group"]))
    if "complexity" in fields:
        text += ".complexity(%s)" % rust_str(fields["complexity"])
    flags = flag_names(name, fields.get("doc_flags", []), DOC_FLAGS)
    if flags:
        text += ".flags(%s)" % " | ".join(flags)
    for field in ("deprecated_since", "replaced_by"):
        if field in fields:
            text += ".%s(%s)" % (field, rust_str(fields[field]))
    if "history" in fields:
        text += ".history(&[%s])" % ", ".join(
            "(%s, %s)" % tuple(rust_str(s) for s in bulk_pair(name, h))
            for h in fields["history"])
    args = fields.get("arguments")
    if args is not None:
        # An empty argument list would be `*0`, which the Rust side cannot tell from none.
        if not args:
            sys.exit("%s: an empty argument list is new to this script" % name)
        text += ".args(&[\n%s    ])" % "".join(
            "        %s,\n" % rust_arg(name, a) for a in args)
    return text + ",\n"


PREAMBLE = '''\
//! GENERATED by scripts/gen_command_docs.py from {redis}, and from {module} for
//! the module commands: do not edit by hand, run the script again (see its docstring).
//!
//! Every command's `COMMAND DOCS` entry but its subcommands (which come from the command table),
//! as Redis answers it: summary, since, group, complexity, doc flags, deprecation, history and
//! the nested arguments. Sorted by name for [`lookup`]. RedisBloom registers no docs, so its
//! commands have only their group and module. CLIENT SETINFO and CLIENT NO-TOUCH, which 7.0
//! lacks, have no entry.

/// A command's doc flags (Redis's `CMD_DOC_*`).
pub mod doc_flags {{
{doc_flag_consts}

    /// Names in the order Redis lists them.
{doc_flag_names}
}}

/// An argument's flags (Redis's `CMD_ARG_*`).
pub mod arg_flags {{
{arg_flag_consts}

    /// Names in the order Redis lists them.
{arg_flag_names}
}}

{flag_uses}
/// An argument's type (Redis's `redisCommandArgType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgType {{
    String,
    Integer,
    Double,
    Key,
    Pattern,
    UnixTime,
    PureToken,
    /// One of the nested arguments.
    OneOf,
    /// The nested arguments in sequence.
    Block,
}}

impl ArgType {{
    /// The name COMMAND DOCS gives.
    pub fn name(self) -> &'static str {{
        match self {{
{arg_type_names}
        }}
    }}

    /// Whether the argument nests others (Redis then always writes its `arguments`).
    pub fn nests(self) -> bool {{
        matches!(self, ArgType::OneOf | ArgType::Block)
    }}
}}

/// One argument of a command, fields in the order COMMAND DOCS writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arg {{
    pub name: &'static str,
    pub kind: ArgType,
    /// The key spec (in COMMAND INFO's element 9) that finds this argument, if it is a key.
    pub key_spec_index: Option<u8>,
    pub token: Option<&'static str>,
    pub summary: Option<&'static str>,
    pub since: Option<&'static str>,
    pub deprecated_since: Option<&'static str>,
    /// [`arg_flags`].
    pub flags: u8,
    /// For [`ArgType::OneOf`] and [`ArgType::Block`].
    pub arguments: &'static [Arg],
}}

/// One command's docs, fields in the order COMMAND DOCS writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandDoc {{
    /// As registered; `container|sub` for a subcommand.
    pub name: &'static str,
    pub summary: Option<&'static str>,
    pub since: Option<&'static str>,
    pub group: &'static str,
    pub complexity: Option<&'static str>,
    /// The module that registered the command.
    pub module: Option<&'static str>,
    /// [`doc_flags`].
    pub flags: u8,
    pub deprecated_since: Option<&'static str>,
    pub replaced_by: Option<&'static str>,
    /// `(version, change)` pairs.
    pub history: &'static [(&'static str, &'static str)],
    /// Empty when Redis writes no `arguments` field.
    pub arguments: &'static [Arg],
}}

impl CommandDoc {{
    pub const fn complexity(mut self, complexity: &'static str) -> Self {{
        self.complexity = Some(complexity);
        self
    }}
    pub const fn flags(mut self, flags: u8) -> Self {{
        self.flags = flags;
        self
    }}
    pub const fn deprecated_since(mut self, version: &'static str) -> Self {{
        self.deprecated_since = Some(version);
        self
    }}
    pub const fn replaced_by(mut self, replacement: &'static str) -> Self {{
        self.replaced_by = Some(replacement);
        self
    }}
    pub const fn history(mut self, history: &'static [(&'static str, &'static str)]) -> Self {{
        self.history = history;
        self
    }}
    pub const fn args(mut self, arguments: &'static [Arg]) -> Self {{
        self.arguments = arguments;
        self
    }}
}}

impl Arg {{
    pub const fn key_spec(mut self, index: u8) -> Self {{
        self.key_spec_index = Some(index);
        self
    }}
    pub const fn token(mut self, token: &'static str) -> Self {{
        self.token = Some(token);
        self
    }}
    pub const fn summary(mut self, summary: &'static str) -> Self {{
        self.summary = Some(summary);
        self
    }}
    pub const fn since(mut self, version: &'static str) -> Self {{
        self.since = Some(version);
        self
    }}
    pub const fn deprecated_since(mut self, version: &'static str) -> Self {{
        self.deprecated_since = Some(version);
        self
    }}
    pub const fn flags(mut self, flags: u8) -> Self {{
        self.flags = flags;
        self
    }}
}}

/// A core command's docs: the fields every one of them has.
pub const fn doc(
    name: &'static str,
    summary: &'static str,
    since: &'static str,
    group: &'static str,
) -> CommandDoc {{
    CommandDoc {{
        name,
        summary: Some(summary),
        since: Some(since),
        group,
        complexity: None,
        module: None,
        flags: 0,
        deprecated_since: None,
        replaced_by: None,
        history: &[],
        arguments: &[],
    }}
}}

/// A module command that registered no docs: Redis answers its group and module only.
const fn module_doc(name: &'static str, module: &'static str) -> CommandDoc {{
    CommandDoc {{
        summary: None,
        since: None,
        module: Some(module),
        ..doc(name, "", "", "module")
    }}
}}

pub const fn arg(name: &'static str, kind: ArgType) -> Arg {{
    Arg {{
        name,
        kind,
        key_spec_index: None,
        token: None,
        summary: None,
        since: None,
        deprecated_since: None,
        flags: 0,
        arguments: &[],
    }}
}}

const fn string(name: &'static str) -> Arg {{
    arg(name, ArgType::String)
}}

const fn integer(name: &'static str) -> Arg {{
    arg(name, ArgType::Integer)
}}

const fn double(name: &'static str) -> Arg {{
    arg(name, ArgType::Double)
}}

const fn pattern(name: &'static str) -> Arg {{
    arg(name, ArgType::Pattern)
}}

const fn unix_time(name: &'static str) -> Arg {{
    arg(name, ArgType::UnixTime)
}}

/// A key, found by the key spec at `key_spec_index`.
const fn key(name: &'static str, key_spec_index: u8) -> Arg {{
    arg(name, ArgType::Key).key_spec(key_spec_index)
}}

/// A pure token: the word `token` itself.
const fn token(name: &'static str, token: &'static str) -> Arg {{
    arg(name, ArgType::PureToken).token(token)
}}

const fn oneof(name: &'static str, arguments: &'static [Arg]) -> Arg {{
    Arg {{
        arguments,
        ..arg(name, ArgType::OneOf)
    }}
}}

const fn block(name: &'static str, arguments: &'static [Arg]) -> Arg {{
    Arg {{
        arguments,
        ..arg(name, ArgType::Block)
    }}
}}

/// The docs of the command (or `container|sub`) registered as `name`.
pub fn lookup(name: &str) -> Option<&'static CommandDoc> {{
    DOCS.binary_search_by(|d| d.name.cmp(name))
        .ok()
        .and_then(|i| DOCS.get(i))
}}

#[rustfmt::skip]
pub static DOCS: &[CommandDoc] = &[
'''


def render(rows, redis_version, module_version):
    def consts(flags):
        return "\n".join("    pub const %s: u8 = 1 << %d;" % (r, i)
                         for i, (_, r) in enumerate(flags))

    def names(flags):
        # As rustfmt lays it out: on one line if it fits in 100 columns.
        pairs = ["(%s, %s)" % (r, rust_str(n)) for n, r in flags]
        one_line = "    pub const NAMES: &[(u8, &str)] = &[%s];" % ", ".join(pairs)
        if len(one_line) <= 100:
            return one_line
        return "    pub const NAMES: &[(u8, &str)] = &[\n%s\n    ];" % "\n".join(
            "        %s," % p for p in pairs)

    arg_type_names = "\n".join("            ArgType::%s => %s," % (r, rust_str(n))
                               for n, r in ARG_TYPES.items())
    data = "".join(rows[name] for name in sorted(rows))
    # The flag constants the data uses (an unused import would be a warning).
    flag_uses = "".join("use %s::*;\n" % module for module, flags in
                        (("arg_flags", ARG_FLAGS), ("doc_flags", DOC_FLAGS))
                        if any(re.search(r"\b%s\b" % r, data) for _, r in flags))
    out = PREAMBLE.format(flag_uses=flag_uses, redis="redis-server " + redis_version,
                          module="RedisBloom " + module_version,
                          doc_flag_consts=consts(DOC_FLAGS), doc_flag_names=names(DOC_FLAGS),
                          arg_flag_consts=consts(ARG_FLAGS), arg_flag_names=names(ARG_FLAGS),
                          arg_type_names=arg_type_names)
    return out + data + "];\n"


def main():
    args = info.reference_args(__doc__.split("\n")[0], 7793)
    with info.reference_servers(args, "gen-command-docs-") as (redis_port, module_port, ours_port,
                                                                version):
        redis, module = TypedConn(redis_port), TypedConn(module_port)
        for conn in (redis, module):
            conn.cmd("HELLO", "3")
        module_info = info.Conn(module_port)
        module_info.cmd("HELLO", "3")
        module_version = info.module_version_of(module_info)

        rows = {}
        for name in info.hyperbloom_names(info.Conn(ours_port)):
            source = module if name.startswith(info.MODULE_PREFIXES) else redis
            kind, entries = source.cmd("COMMAND", "DOCS", name)
            if kind != "%":
                sys.exit("%s: COMMAND DOCS answered %r" % (name, (kind, entries)))
            if not entries:
                if name in NEWER_THAN_7_0:
                    continue
                sys.exit("%s: no reference for it in redis-server %s" % (name, version))
            [((_, answered), entry)] = entries
            if answered != name:
                sys.exit("%s: COMMAND DOCS answered for %s" % (name, answered))
            # The subcommands come from hyperbloom's table, not from here.
            entry = (entry[0], [(k, v) for k, v in entry[1] if k != ("$", "subcommands")])
            rows[name] = rust_doc(name, entry)

    with open(OUT, "w") as f:
        f.write(render(rows, version, module_version))
    print("wrote %s: %d commands (redis-server %s, RedisBloom %s)"
          % (os.path.relpath(OUT, ROOT), len(rows), version, module_version))


if __name__ == "__main__":
    main()
