#!/usr/bin/env python3
"""Generates src/commands/command_info.rs: the COMMAND INFO facts hyperbloom's table does not hold.

COMMAND / COMMAND INFO answer ten elements per command. Elements 1-6 and 10 (name, arity, flags,
key positions, subcommands) come from hyperbloom's own command table; elements 7-9 (ACL
categories, tips, key specs) are Redis's data, and this script copies them from a real
redis-server 7.0 rather than by hand:

  1. starts hyperbloom (the build of this tree) and reads its command names, subcommands included,
     from `COMMAND`;
  2. starts Debian's redis-server 7.0 twice, once plain (the core commands) and once with
     RedisBloom loaded (BF.*, CF.*, CMS.*, TOPK.*, TDIGEST.*: module commands answer what Redis
     derives for a module that declares only first/last/step; their ACL categories are the
     current line's, from MODULE_CATEGORIES, as 2.6 declares none);
  3. asks each for `COMMAND INFO name` in RESP3 and writes the categories, tips and key specs as
     static tables sorted by name.

A command hyperbloom has but redis-server 7.0 lacks (CLIENT SETINFO and NO-TOUCH are 7.2's) takes
its facts from EXTRA below, which says where they come from; any other name without a reference is
an error, so a new command cannot slip in without its facts.

    scripts/gen_command_info.py [--hyperbloom target/ci/hyperbloom]
                                [--redis-module target/refbloom/redisbloom.so]

Needs only python3's standard library (RESP over a socket). The servers listen on ports outside
12000-32000 (the tests' range), default 7790-7792, and are stopped at the end.
"""

import argparse
import contextlib
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "src", "commands", "command_info.rs")
MODULE_PREFIXES = ("bf.", "cf.", "cms.", "topk.", "tdigest.")

# Commands newer than redis-server 7.0, in the form COMMAND INFO gives them (RESP3 values decoded):
# categories with their `@`, tips, key specs. Redis adds `@slow` to every command not marked fast.
EXTRA = {
    # Redis 7.2 src/commands/client-setinfo.json: acl_categories CONNECTION, no tips, no keys.
    "client|setinfo": (["@slow", "@connection"], [], []),
    # Redis 7.2 src/commands/client-no-touch.json: acl_categories CONNECTION, no tips, no keys.
    "client|no-touch": (["@slow", "@connection"], [], []),
}

# The ACL categories of RedisBloom's current line (bundled with Redis 8), which the project follows
# where the lines differ: 2.6 declares none, so the module server answers an empty list. The
# current line sets them with RedisModule_SetCommandACLCategories, which stores exactly the flags
# given (no implicit @slow, unlike core commands), and COMMAND INFO lists them in the order of
# Redis's category table (@read/@write before @fast), then the categories a module added
# (@bloom, @cuckoo, @cms, @topk, @tdigest). Source: the spec's command tables (bloom.md §4,
# cuckoo.md §4, cms.md, topk.md §3, tdigest.md §5).
MODULE_CATEGORIES = {
    "bf.reserve": "@write @fast @bloom", "bf.add": "@write @bloom", "bf.madd": "@write @bloom",
    "bf.insert": "@write @bloom", "bf.exists": "@read @bloom", "bf.mexists": "@read @bloom",
    "bf.info": "@read @fast @bloom", "bf.card": "@read @fast @bloom", "bf.debug": "@read @bloom",
    "bf.scandump": "@read @bloom", "bf.loadchunk": "@write @bloom",
    "cf.reserve": "@write @fast @cuckoo", "cf.add": "@write @cuckoo", "cf.addnx": "@write @cuckoo",
    "cf.insert": "@write @cuckoo", "cf.insertnx": "@write @cuckoo", "cf.exists": "@read @cuckoo",
    "cf.mexists": "@read @cuckoo", "cf.count": "@read @cuckoo", "cf.del": "@write @cuckoo",
    "cf.compact": "@read @cuckoo", "cf.scandump": "@read @cuckoo", "cf.loadchunk": "@write @cuckoo",
    "cf.info": "@read @fast @cuckoo", "cf.debug": "@read @cuckoo",
    "cms.initbydim": "@write @fast @cms", "cms.initbyprob": "@write @fast @cms",
    "cms.incrby": "@write @cms", "cms.query": "@read @cms", "cms.merge": "@write @cms",
    "cms.info": "@read @fast @cms",
    "topk.reserve": "@write @fast @topk", "topk.add": "@write @topk", "topk.incrby": "@write @topk",
    "topk.query": "@read @topk", "topk.count": "@read @topk", "topk.list": "@read @topk",
    "topk.info": "@read @fast @topk",
    "tdigest.create": "@write @fast @tdigest", "tdigest.add": "@write @tdigest",
    "tdigest.reset": "@write @fast @tdigest", "tdigest.merge": "@write @tdigest",
    "tdigest.min": "@read @fast @tdigest", "tdigest.max": "@read @fast @tdigest",
    "tdigest.quantile": "@read @fast @tdigest", "tdigest.cdf": "@read @fast @tdigest",
    "tdigest.rank": "@read @fast @tdigest", "tdigest.revrank": "@read @fast @tdigest",
    "tdigest.byrank": "@read @fast @tdigest", "tdigest.byrevrank": "@read @fast @tdigest",
    "tdigest.trimmed_mean": "@read @tdigest", "tdigest.info": "@read @fast @tdigest",
}

# Key-spec flags in the order Redis 7.0 lists them (addReplyFlagsForKeyArgs); the Rust constant
# of each.
KEY_FLAGS = [
    ("RO", "RO"),
    ("RW", "RW"),
    ("OW", "OW"),
    ("RM", "RM"),
    ("access", "ACCESS"),
    ("update", "UPDATE"),
    ("insert", "INSERT"),
    ("delete", "DELETE"),
    ("not_key", "NOT_KEY"),
    ("incomplete", "INCOMPLETE"),
    ("variable_flags", "VARIABLE_FLAGS"),
]


# ---------------------------------------------------------------------------------------------
# RESP
# ---------------------------------------------------------------------------------------------


class Conn:
    """One RESP connection; replies decode to Python values (maps to lists of pairs)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self.read()

    def _more(self):
        data = self.sock.recv(1 << 16)
        if not data:
            raise EOFError("connection closed")
        self.buf += data

    def _line(self):
        while b"\r\n" not in self.buf:
            self._more()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._more()
        data, self.buf = self.buf[:n], self.buf[n + 2 :]
        return data

    def read(self):
        line = self._line()
        kind, rest = chr(line[0]), line[1:]
        if kind == "+":
            return rest.decode()
        if kind == "-":
            raise RuntimeError(rest.decode())
        if kind == ":":
            return int(rest)
        if kind == "_":
            return None
        if kind in "$=":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode()
        if kind in "*~>":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        if kind == "%":
            return [(self.read(), self.read()) for _ in range(int(rest))]
        raise ValueError("unexpected reply %r" % line)


# ---------------------------------------------------------------------------------------------
# Servers
# ---------------------------------------------------------------------------------------------


def start(argv, port):
    """Starts a server and waits until it answers PING; returns the process."""
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", port)) == 0:
            sys.exit("port %d is in use: pick others with --port-base" % port)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit("%s exited with %s" % (argv[0], proc.returncode))
        try:
            if Conn(port).cmd("PING") == "PONG":
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("%s did not answer on port %d" % (argv[0], port))


def redis_argv(binary, port, workdir, extra):
    return [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", workdir, "--loglevel", "warning"] + extra


# ---------------------------------------------------------------------------------------------
# Facts
# ---------------------------------------------------------------------------------------------


def hyperbloom_names(conn):
    """Every command and subcommand hyperbloom lists, as registered."""
    names = []
    for entry in conn.cmd("COMMAND"):
        names.append(entry[0])
        names.extend(sub[0] for sub in entry[9])
    return names


def facts(conn, name):
    """(categories, tips, key specs) of `name` from COMMAND INFO, or None if unknown."""
    [entry] = conn.cmd("COMMAND", "INFO", name)
    if entry is None:
        return None
    specs = []
    for spec in entry[8]:
        fields = dict(spec)
        unknown = set(fields) - {"notes", "flags", "begin_search", "find_keys"}
        if unknown:
            sys.exit("%s: key spec fields %s are new to this script" % (name, sorted(unknown)))
        specs.append((fields.get("notes"), fields["flags"], dict(fields["begin_search"]),
                      dict(fields["find_keys"])))
    return entry[6], entry[7], specs


# ---------------------------------------------------------------------------------------------
# Rust
# ---------------------------------------------------------------------------------------------


def rust_str(s):
    out = s.replace("\\", "\\\\").replace('"', '\\"')
    return '"%s"' % out


def rust_strs(items):
    return "&[%s]" % ", ".join(rust_str(i) for i in items)


def rust_flags(name, flags):
    known = dict(KEY_FLAGS)
    for f in flags:
        if f not in known:
            sys.exit("%s: key-spec flag %r is new to this script" % (name, f))
    order = [f for f, _ in KEY_FLAGS]
    if list(flags) != sorted(flags, key=order.index):
        sys.exit("%s: key-spec flags %s not in Redis's order" % (name, flags))
    return " | ".join(known[f] for f in flags) or "0"


def rust_begin_search(name, bs):
    spec = dict(bs["spec"])
    if bs["type"] == "index":
        return "Index(%d)" % spec["index"]
    if bs["type"] == "keyword":
        return "Keyword { keyword: %s, startfrom: %d }" % (rust_str(spec["keyword"]),
                                                            spec["startfrom"])
    if bs["type"] == "unknown" and not spec:
        return "BeginSearch::Unknown"
    sys.exit("%s: begin_search %r is new to this script" % (name, bs))


def rust_find_keys(name, fk):
    spec = dict(fk["spec"])
    if fk["type"] == "range":
        return "Range { lastkey: %d, keystep: %d, limit: %d }" % (
            spec["lastkey"], spec["keystep"], spec["limit"])
    if fk["type"] == "keynum":
        return "Keynum { keynumidx: %d, firstkey: %d, keystep: %d }" % (
            spec["keynumidx"], spec["firstkey"], spec["keystep"])
    if fk["type"] == "unknown" and not spec:
        return "FindKeys::Unknown"
    sys.exit("%s: find_keys %r is new to this script" % (name, fk))


def rust_key_spec(name, spec):
    notes, flags, bs, fk = spec
    text = "spec(%s, %s, %s)" % (rust_flags(name, flags), rust_begin_search(name, bs),
                                 rust_find_keys(name, fk))
    if notes is not None:
        text = "KeySpec { notes: Some(%s), ..%s }" % (rust_str(notes), text)
    return text


PREAMBLE = '''\
//! GENERATED by scripts/gen_command_info.py from {redis}, and from {module} for
//! the module commands: do not edit by hand, run the script again (see its docstring).
//!
//! The ACL categories, tips and key specs of every command hyperbloom lists, as `COMMAND INFO`
//! answers them in elements 7 to 9; the rest of an entry comes from the command table. Sorted by
//! name for [`lookup`]. CLIENT SETINFO and CLIENT NO-TOUCH are Redis 7.2's (its JSON command
//! files), as 7.0 lacks them. The module commands' ACL categories are RedisBloom's current line's
//! (the script's MODULE_CATEGORIES), as 2.6 declares none.

/// Key-spec flags (Redis's `CMD_KEY_*`).
pub mod key_flags {{
{flag_consts}

    /// Names in the order Redis lists them.
    pub const NAMES: &[(u16, &str)] = &[
{flag_names}
    ];
}}

use key_flags::*;
{variant_uses}
/// Where the search for a key spec's keys begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeginSearch {{
    /// At this argument index.
    Index(i32),
    /// After the first argument equal to `keyword` (any case), searching from index `startfrom`
    /// (from the end when negative).
    Keyword {{
        keyword: &'static str,
        startfrom: i32,
    }},
    Unknown,
}}

/// How the keys are found from where the search began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindKeys {{
    /// The keys run to `lastkey` (relative to the start; from the end of the arguments when
    /// negative), every `keystep` arguments; a `limit` above 0 takes 1/limit of the rest.
    Range {{
        lastkey: i32,
        keystep: i32,
        limit: i32,
    }},
    /// The argument at `keynumidx` (relative to the start) counts the keys, which begin at
    /// `firstkey` (relative to the start), every `keystep` arguments.
    Keynum {{
        keynumidx: i32,
        firstkey: i32,
        keystep: i32,
    }},
    Unknown,
}}

/// One key spec of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpec {{
    pub notes: Option<&'static str>,
    /// [`key_flags`].
    pub flags: u16,
    pub begin_search: BeginSearch,
    pub find_keys: FindKeys,
}}

const fn spec(flags: u16, begin_search: BeginSearch, find_keys: FindKeys) -> KeySpec {{
    KeySpec {{
        notes: None,
        flags,
        begin_search,
        find_keys,
    }}
}}

/// A command's facts: name as registered, ACL categories (with their `@`), tips, key specs.
pub type CommandInfo = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    &'static [KeySpec],
);

/// The facts of the command (or `container|sub`) registered as `name`.
pub fn lookup(name: &str) -> Option<&'static CommandInfo> {{
    COMMANDS
        .binary_search_by(|(n, ..)| (*n).cmp(name))
        .ok()
        .and_then(|i| COMMANDS.get(i))
}}

#[rustfmt::skip]
pub static COMMANDS: &[CommandInfo] = &[
'''


def render(rows, redis_version, module_version):
    flag_consts = "\n".join("    pub const %s: u16 = 1 << %d;" % (r, i)
                            for i, (_, r) in enumerate(KEY_FLAGS))
    flag_names = "\n".join("        (%s, %s)," % (r, rust_str(n)) for n, r in KEY_FLAGS)
    lines = []
    for name, (cats, tips, specs) in sorted(rows.items()):
        lines.append("    (%s, %s, %s, &[%s]),\n" % (
            rust_str(name), rust_strs(cats), rust_strs(tips),
            ", ".join(rust_key_spec(name, s) for s in specs)))
    data = "".join(lines)
    # Short names for the variants the data uses (an unused import would be a warning).
    uses = []
    for enum, variants in (("BeginSearch", ("Index", "Keyword")),
                           ("FindKeys", ("Keynum", "Range"))):
        used = [v for v in variants if re.search(r"[(, ]%s[ (]" % v, data)]
        if len(used) == 1:
            uses.append("use %s::%s;\n" % (enum, used[0]))
        elif used:
            uses.append("use %s::{%s};\n" % (enum, ", ".join(used)))
    out = PREAMBLE.format(redis="redis-server " + redis_version,
                          module="RedisBloom " + module_version,
                          flag_consts=flag_consts, flag_names=flag_names,
                          variant_uses="".join(uses))
    return out + data + "];\n"


def module_version_of(conn):
    for module in conn.cmd("MODULE", "LIST"):
        fields = dict(module)
        if fields.get("name") == "bf":
            v = int(fields["ver"])
            return "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100)
    sys.exit("the module server has no `bf` module loaded")


def reference_args(description: str, port_base: int):
    """The command line both generators take; checks the ports and the module."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--hyperbloom", default=os.path.join(ROOT, "target", "ci", "hyperbloom"))
    parser.add_argument("--redis-server", default="/usr/bin/redis-server")
    parser.add_argument("--redis-module",
                        default=os.path.join(ROOT, "target", "refbloom", "redisbloom.so"),
                        help="RedisBloom's .so (scripts/fetch-redisbloom.sh fetches it)")
    parser.add_argument("--port-base", type=int, default=port_base)
    args = parser.parse_args()
    if 12000 <= args.port_base + 2 and args.port_base < 32000:
        sys.exit("keep the ports outside 12000-32000: the tests hand those out")
    if not os.path.exists(args.redis_module):
        sys.exit("no %s: run scripts/fetch-redisbloom.sh or pass --redis-module" % args.redis_module)
    return args


@contextlib.contextmanager
def reference_servers(args, prefix: str):
    """Starts redis-server plain, redis-server with RedisBloom and hyperbloom on three ports
    from `--port-base`; yields (plain, module, hyperbloom) ports and the Redis version (7.0
    required); stops them all at the end."""
    redis_port, module_port, ours_port = args.port_base, args.port_base + 1, args.port_base + 2
    procs = []
    with tempfile.TemporaryDirectory(prefix=prefix) as workdir:
        try:
            for sub in ("plain", "module", "ours"):
                os.mkdir(os.path.join(workdir, sub))
            procs.append(start(redis_argv(args.redis_server, redis_port,
                                          os.path.join(workdir, "plain"), []), redis_port))
            procs.append(start(redis_argv(args.redis_server, module_port,
                                          os.path.join(workdir, "module"),
                                          ["--loadmodule", args.redis_module]), module_port))
            procs.append(start([args.hyperbloom, "--port", str(ours_port), "--bind", "127.0.0.1",
                                "--save", "", "--dir", os.path.join(workdir, "ours")], ours_port))
            info = Conn(redis_port).cmd("INFO", "server")
            version = next(l.split(":", 1)[1] for l in info.splitlines()
                           if l.startswith("redis_version:"))
            if not version.startswith("7.0."):
                sys.exit("redis-server %s: the reference is Redis 7.0" % version)
            yield redis_port, module_port, ours_port, version
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()


def main():
    args = reference_args(__doc__.split("\n")[0], 7790)
    with reference_servers(args, "gen-command-info-") as (redis_port, module_port, ours_port,
                                                           version):
        redis, module, ours = Conn(redis_port), Conn(module_port), Conn(ours_port)
        for conn in (redis, module):
            conn.cmd("HELLO", "3")
        module_version = module_version_of(module)

        rows = {}
        for name in hyperbloom_names(ours):
            source = module if name.startswith(MODULE_PREFIXES) else redis
            found = facts(source, name)
            if found is None:
                found = EXTRA.get(name)
            if found is None:
                sys.exit("%s: no reference for it in redis-server %s, nor in EXTRA"
                         % (name, version))
            if name.startswith(MODULE_PREFIXES):
                if name not in MODULE_CATEGORIES:
                    sys.exit("%s: no current-line ACL categories in MODULE_CATEGORIES" % name)
                cats, tips, specs = found
                if cats:
                    sys.exit("%s: the module server declares categories %r; check MODULE_CATEGORIES"
                             % (name, cats))
                found = (MODULE_CATEGORIES[name].split(), tips, specs)
            rows[name] = found

    with open(OUT, "w") as f:
        f.write(render(rows, version, module_version))
    print("wrote %s: %d commands (redis-server %s, RedisBloom %s)"
          % (os.path.relpath(OUT, ROOT), len(rows), version, module_version))


if __name__ == "__main__":
    main()
