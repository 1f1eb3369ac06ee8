// Drives `state-mcp` with the official MCP TypeScript SDK as the client:
// - `--compat sidecar`: the workflow and lease tools, whose results the SDK checks against
//   each tool's outputSchema (it throws on a result that does not fit);
// - the default list: `state_tools` enables a group, the server says the list changed, and the
//   next `tools/list` holds the group's tools, which are then called by name.
//
// Usage: node sidecar.mjs STATE_MCP_BINARY SCRATCH_DIR
// Prints a last line `N tools called, N list changes seen`; exits 1 on the first failure.

import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [binary, scratch] = process.argv.slice(2);
mkdirSync(scratch, { recursive: true });

let calls = 0;

async function connect(name, args) {
  const transport = new StdioClientTransport({
    command: binary,
    args: ["--db", join(scratch, `${name}.redb`), "--standalone", "--log", "warn", ...args],
    stderr: "inherit",
  });
  const client = new Client({ name: "state-sdk-test", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

async function call(client, name, args, { error = false } = {}) {
  const result = await client.callTool({ name, arguments: args });
  if (Boolean(result.isError) !== error) {
    throw new Error(`${name}(${JSON.stringify(args)}): isError=${result.isError}: ${JSON.stringify(result.content)}`);
  }
  calls += 1;
  return result.structuredContent;
}

async function sidecar() {
  const client = await connect("sidecar", ["--compat", "sidecar"]);
  await client.listTools(); // the SDK keeps each tool's outputSchema to check results with
  const run = await call(client, "workflow_create", { name: "job", tags: { team: "a" } });
  await call(client, "workflow_list", {});
  await call(client, "workflow_discover", { status: "created" });
  await call(client, "workflow_status", { run_id: run.run_id });
  const won = await call(client, "workflow_claim", { run_id: run.run_id, agent_id: "a1" });
  const lost = await call(client, "workflow_claim", { run_id: run.run_id, agent_id: "a2" });
  if (!won.claimed || lost.claimed || lost.reason === null) {
    throw new Error(`exactly one claim wins: ${JSON.stringify([won, lost])}`);
  }
  await call(client, "workflow_checkpoint", { run_id: run.run_id, step: 1, output: { ok: true } });
  await call(client, "workflow_resume", { run_id: run.run_id });
  const lease = await call(client, "lease_acquire", { resource_id: "gpu", holder_id: "a1", ttl_seconds: 30 });
  const refused = await call(client, "lease_acquire", { resource_id: "gpu", holder_id: "a2", ttl_seconds: 30 });
  if (!lease.acquired || refused.acquired || refused.holder !== "a1") {
    throw new Error(`one holder: ${JSON.stringify([lease, refused])}`);
  }
  await call(client, "lease_renew", { resource_id: "gpu", holder_id: "a1", ttl_seconds: 30 });
  await call(client, "lease_release", { resource_id: "gpu", holder_id: "a1" });
  await call(client, "history_log", { n: 5 });
  await client.close();
}

async function discovery() {
  const client = await connect("default", []);
  let changes = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
    changes += 1;
  });
  const before = (await client.listTools()).tools.map((tool) => tool.name);
  if (!before.includes("state_tools") || before.includes("workflow_create")) {
    throw new Error(`default list: ${before}`);
  }
  const answer = await call(client, "state_tools", { enable: ["workflow"] });
  if (!answer.tools.some((tool) => tool.name === "workflow_create")) {
    throw new Error(`state_tools answered ${JSON.stringify(answer)}`);
  }
  for (let i = 0; i < 50 && changes === 0; i += 1) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  if (changes === 0) throw new Error("no notifications/tools/list_changed after enabling a group");
  const after = (await client.listTools()).tools.map((tool) => tool.name);
  if (!after.includes("workflow_create") || !after.includes("state_get")) {
    throw new Error(`list after enabling workflow: ${after}`);
  }
  const run = await call(client, "workflow_create", { name: "found" });
  await call(client, "workflow_status", { run_id: run.run_id });
  await client.close();
  return changes;
}

try {
  await sidecar();
  const changes = await discovery();
  console.log(`${calls} tools called, ${changes} list changes seen`);
} catch (error) {
  console.log(`FAILED: ${error.message ?? error}`);
  process.exit(1);
}
