// The floor of the edge benchmark: the I/O a queuegate route does and none
// of its work (no identity, no checks, no state model, no cookies).
// Position and enter: one POST to the REST endpoint and a small JSON reply.
// An order: one REST call, the origin, and one more REST call after the
// reply (waitUntil), as consume, forward and settle do. A far-back poll
// (it carries a place cookie) is answered with a static JSON reply and no
// I/O at all: the worker answers it from its snapshot without Redis, so
// its floor is the cheapest reply a worker can give.
const rest = (env) =>
  fetch(env.UPSTASH_REDIS_REST_URL + "/", {
    method: "POST",
    headers: {
      authorization: "Bearer " + env.UPSTASH_REDIS_REST_TOKEN,
      "content-type": "application/json",
    },
    body: env.FLOOR_BODY,
  }).then((r) => r.json());

const STATIC_REPLY = JSON.stringify({
  state: "waiting", queue: "main", position: 10000, etaSeconds: 60, retryAfterMs: 30000,
  approximate: true,
});

export default {
  async fetch(request, env, ctx) {
    if (new URL(request.url).pathname === "/orders") {
      await rest(env);
      const origin = await fetch(env.ORIGIN_URL + "/orders", { method: "POST" });
      ctx.waitUntil(rest(env));
      return new Response(origin.body, {
        status: origin.status,
        headers: { "content-type": "application/json" },
      });
    }
    if ((request.headers.get("cookie") || "").includes("qg_place=")) {
      return new Response(STATIC_REPLY, {
        headers: { "content-type": "application/json; charset=utf-8", "cache-control": "no-store" },
      });
    }
    const reply = await rest(env);
    return new Response(JSON.stringify({ state: "waiting", queue: "main", result: reply.result }), {
      headers: { "content-type": "application/json; charset=utf-8", "cache-control": "no-store" },
    });
  },
};
