// Drives `state-mcp --compat memory` with the official MCP TypeScript SDK, the client most
// memory-server users run: all nine tools with the memory server's arguments, each result
// checked by the SDK against the tool's outputSchema (it throws on one that does not fit).
//
// Usage: node memory.mjs STATE_MCP_BINARY SCRATCH_DIR
// Prints a last line `N memory tools called`; exits 1 on the first failure.

import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [binary, scratch] = process.argv.slice(2);
mkdirSync(scratch, { recursive: true });

async function main() {
  const transport = new StdioClientTransport({
    command: binary,
    args: ["--db", join(scratch, "memory.redb"), "--standalone", "--log", "warn", "--compat", "memory"],
    stderr: "inherit",
  });
  const client = new Client({ name: "state-sdk-test", version: "1.0.0" });
  await client.connect(transport);
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  const expected = ["add_observations", "create_entities", "create_relations", "delete_entities", "delete_observations",
    "delete_relations", "open_nodes", "read_graph", "search_nodes"];
  if (JSON.stringify(names) !== JSON.stringify(expected)) throw new Error(`listed ${names}`);
  const called = new Set();
  const call = async (name, args, error = false) => {
    const result = await client.callTool({ name, arguments: args });
    if (Boolean(result.isError) !== error) throw new Error(`${name}: isError=${result.isError}: ${JSON.stringify(result.content)}`);
    called.add(name);
    return result.structuredContent;
  };
  await call("create_entities", { entities: [{ name: "Ada", entityType: "person", observations: ["wrote notes"] },
    { name: "Engine", entityType: "machine", observations: [] }] });
  await call("create_relations", { relations: [{ from: "Ada", to: "Engine", relationType: "programmed" }] });
  const added = await call("add_observations", { observations: [{ entityName: "Ada", contents: ["born 1815"] }] });
  if (added.results[0].addedObservations[0] !== "born 1815") throw new Error(JSON.stringify(added));
  await call("add_observations", { observations: [{ entityName: "Nobody", contents: ["x"] }] }, true);
  const found = await call("search_nodes", { query: "born" });
  if (found.entities.length !== 1 || found.relations.length !== 1) throw new Error(JSON.stringify(found));
  await call("open_nodes", { names: ["Engine"] });
  await call("delete_observations", { deletions: [{ entityName: "Ada", observations: ["born 1815"] }] });
  await call("delete_relations", { relations: [{ from: "Ada", to: "Engine", relationType: "programmed" }] });
  await call("delete_entities", { entityNames: ["Engine"] });
  const graph = await call("read_graph", {});
  if (graph.entities.length !== 1 || graph.relations.length !== 0) throw new Error(JSON.stringify(graph));
  await client.close();
  console.log(`${called.size} memory tools called`);
}

main().catch((error) => {
  console.log(`FAILED: ${error.message ?? error}`);
  process.exit(1);
});
