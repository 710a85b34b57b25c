// ioredis subscribe/psubscribe against the server on argv[2]: prints one JSON line per event and
// exits once every published message arrived (tests/compat/test_pubsub.py checks the lines).
const Redis = require("ioredis");
const port = Number(process.argv[2]);
const sub = new Redis({ port, host: "127.0.0.1", lazyConnect: false });
const pub = new Redis({ port, host: "127.0.0.1" });
const got = [];
const want = 6;
let timer;
const done = () => {
  clearTimeout(timer);
  console.log(JSON.stringify(got));
  sub.disconnect();
  pub.disconnect();
};
sub.on("message", (channel, message) => { got.push(["message", channel, message]); if (got.length === want) done(); });
sub.on("pmessage", (pattern, channel, message) => { got.push(["pmessage", pattern, channel, message]); if (got.length === want) done(); });
(async () => {
  const n = await sub.subscribe("news", "weather");
  const m = await sub.psubscribe("n*");
  got.push(["counts", n, m]);
  for (const [ch, msg] of [["news", "a"], ["weather", "b"], ["other", "c"], ["news", "d"]]) {
    await pub.publish(ch, msg);
  }
})().catch((e) => { console.error(e); process.exit(1); });
timer = setTimeout(() => { console.error("timeout", JSON.stringify(got)); process.exit(2); }, 10000);
