//! The MCP handler: tools from the catalog, docs as resources, nothing else.

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, Implementation, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};
use state_store::Engine;
use state_store::dispatch;

use crate::docs;
use crate::options::Options;
use crate::render;
use crate::tools::ToolSet;

/// Tool and resource lists never change while a server runs, so clients may cache them.
const LIST_TTL_MS: u64 = 3_600_000;

#[derive(Clone)]
pub struct StateServer {
    engine: Engine,
    tools: Arc<ToolSet>,
    options: Arc<Options>,
}

impl StateServer {
    pub fn new(engine: Engine, options: Options) -> StateServer {
        let tools = Arc::new(ToolSet::new(&options));
        StateServer { engine, tools, options: Arc::new(options) }
    }
}

const INSTRUCTIONS: &str = "Durable, versioned key-value state shared by every agent using this server. \
Read with state_get; write with state_set passing expected_version from your read (0 = create only). \
A result with status \"conflict\" carries the current version and value: apply your change to that value and retry. \
Keys look like \"project/x/status\". Leases (lease_*) and workflow runs (workflow_*) hand out fencing tokens: \
pass them back, and a status \"fenced\" means you lost ownership. Guides: resources state://docs/usage, \
state://docs/coordination, state://docs/keys, state://docs/what-not-to-store.";

impl ServerHandler for StateServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_resources().build())
            .with_server_info(
                Implementation::new("state", env!("CARGO_PKG_VERSION"))
                    .with_title("state: durable shared state for AI agents"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.all())
            .with_ttl_ms(LIST_TTL_MS)
            .with_cache_scope(CacheScope::Public))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.definition(name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(op) = self.tools.get(&request.name) else {
            return Err(McpError::invalid_params(
                format!("unknown tool `{}`; this server's tools are: {}", request.name, self.tools.names().join(", ")),
                Some(json!({"tool": request.name})),
            ));
        };
        let args = Value::Object(request.arguments.unwrap_or_default());
        let started = Instant::now();
        // Boxed: rmcp moves each request's future into a task, and an unboxed dispatch future
        // (every operation's state inline) made that copy a sixth of the CPU of a call.
        let outcome = Box::pin(dispatch::call(&self.engine, op, args)).await;
        tracing::debug!(
            tool = op.name(),
            ok = outcome.is_ok(),
            micros = started.elapsed().as_micros() as u64,
            "tool call"
        );
        Ok(render::result(op, outcome).into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let resources = docs::for_profiles(&self.options.profiles).map(docs::Doc::resource).collect();
        Ok(ListResourcesResult::with_all_items(resources).with_ttl_ms(LIST_TTL_MS).with_cache_scope(CacheScope::Public))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        match docs::for_profiles(&self.options.profiles).find(|doc| doc.uri == request.uri) {
            Some(doc) => Ok(ReadResourceResult::new(vec![doc.contents()]).into()),
            None => Err(McpError::resource_not_found(
                format!("no resource `{}`; list resources to see the docs this server offers", request.uri),
                Some(json!({"uri": request.uri})),
            )),
        }
    }
}
