//! The MCP handler: tools from the catalog; docs and the store's records as resources, with
//! subscriptions to them.

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ResourceUpdatedNotificationParam, ServerCapabilities, ServerConfig, SubscribeRequestParams, SubscriptionFilter,
    Tool, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};
use state_api::auth::Caller;
use state_api::catalog::{Operation, ToolGroup};
use state_api::{Api, Options};

use crate::resources::{self, Target};
use crate::subscriptions::{self, Subscriptions};
use crate::tools::{self, Enabled, ToolSet};
use crate::{prompts, render};

/// Prompt and template lists never change while a server runs, nor does a tool list until its
/// session enables a group, so clients may cache them. The resource list holds the store's
/// keys, which change at any time.
const LIST_TTL_MS: u64 = 3_600_000;

#[derive(Clone)]
pub struct StateServer {
    api: Api,
    tools: Arc<ToolSet>,
    options: Arc<Options>,
    /// This session's `resources/subscribe` subscriptions.
    subscriptions: Arc<Subscriptions>,
    /// Tool groups this session enabled with `state_tools`.
    enabled: Arc<Enabled>,
    instructions: Arc<str>,
}

impl StateServer {
    /// A server of the tools `options` choose, calling through `api` (an engine in this
    /// process, or the database's owner).
    pub fn new(api: Api, options: Options) -> StateServer {
        let tools = Arc::new(ToolSet::new(&options));
        let mut instructions = INSTRUCTIONS.to_owned();
        if tools.discovers() {
            instructions.push_str(DISCOVER_INSTRUCTIONS);
        }
        if !prompts::list(&tools).is_empty() {
            instructions.push_str(TEXT_INSTRUCTIONS);
        }
        let instructions = instructions.into();
        StateServer {
            api,
            tools,
            options: Arc::new(options),
            subscriptions: Arc::default(),
            enabled: Arc::default(),
            instructions,
        }
    }

    /// The handler for one more session: the same tools, its own subscriptions (which stop
    /// when the session's handler is dropped) and enabled groups.
    pub fn for_session(&self) -> StateServer {
        StateServer { subscriptions: Arc::default(), enabled: Arc::default(), ..self.clone() }
    }

    /// For an HTTP transport, which sees a request before rmcp: when `body` is a
    /// `subscriptions/listen` request, follows its resources now and leaves them in the HTTP
    /// request's `extensions` for `listen`, so they are watched before rmcp acknowledges the
    /// listen. Anything else is left alone. `Some` is the JSON-RPC error to answer instead,
    /// before anything is acknowledged, when a resource cannot be followed or there are too
    /// many.
    pub async fn start_listen(&self, body: &[u8], caller: &Caller, extensions: &mut http::Extensions) -> Option<Value> {
        #[derive(serde::Deserialize)]
        struct Listen {
            id: Value,
            method: String,
            params: ListenParams,
        }
        #[derive(serde::Deserialize)]
        struct ListenParams {
            notifications: SubscriptionFilter,
        }
        let listen = serde_json::from_slice::<Listen>(body).ok().filter(|l| l.method == "subscriptions/listen")?;
        match self.follow_listened(&listen.params.notifications, caller).await {
            Ok(followed) => {
                extensions.insert(subscriptions::Started::new(followed));
                None
            }
            Err(error) => Some(json!({"jsonrpc": "2.0", "id": listen.id, "error": error})),
        }
    }

    /// Starts following, for `principal`, the resources a `subscriptions/listen` asks for.
    pub(crate) async fn follow_listened(
        &self,
        requested: &SubscriptionFilter,
        caller: &Caller,
    ) -> Result<Vec<subscriptions::Changes>, McpError> {
        let uris = requested.resource_subscriptions.as_deref().unwrap_or_default();
        subscriptions::follow_all(&self.api, caller, &self.options, uris).await
    }

    /// The groups this request's session enabled. A session is the legacy protocol's (one
    /// `initialize`); on 2026-07-28 a list may not change as a side effect of other requests,
    /// so there every request sees the list it started with.
    fn enabled(&self, context: &RequestContext<RoleServer>) -> Vec<ToolGroup> {
        if in_session(context) { self.enabled.get() } else { Vec::new() }
    }

    /// `state_tools`: enables groups for a legacy session, whose client is told its list
    /// changed; answers with the new tools' definitions either way.
    async fn discover(&self, arguments: &Map<String, Value>, context: &RequestContext<RoleServer>) -> CallToolResult {
        let discover = |groups: &mut Vec<ToolGroup>| {
            let before = groups.len();
            self.tools.discover(groups, arguments).map(|answer| (answer, groups.len() > before))
        };
        // A session's groups change under its lock, so concurrent calls cannot lose each
        // other's; a 2026-07-28 request's list never changes, so its groups are its own.
        let session = in_session(context);
        let discovered = if session { self.enabled.update(discover) } else { discover(&mut Vec::new()) };
        let (answer, grew) = match discovered {
            Ok(discovered) => discovered,
            Err(message) => return CallToolResult::error(vec![ContentBlock::text(message)]),
        };
        if session
            && grew
            && let Err(error) = context.peer.notify_tool_list_changed().await
        {
            tracing::debug!(%error, "could not tell the client its tool list changed");
        }
        CallToolResult::structured(answer)
    }

    /// Runs a catalog operation for the caller and renders its reply.
    async fn run(&self, op: Operation, args: Value, context: &RequestContext<RoleServer>) -> CallToolResult {
        let started = Instant::now();
        // Boxed: rmcp moves each request's future into a task, and an unboxed dispatch future
        // (every operation's state inline) made that copy a sixth of the CPU of a call.
        let reply = Box::pin(self.api.call_as(&caller(context), op, args)).await;
        tracing::debug!(
            tool = op.name(),
            outcome = reply.outcome.name(),
            micros = started.elapsed().as_micros() as u64,
            "tool call"
        );
        render::reply(op, reply)
    }
}

impl StateServer {
    /// `state_call`: a served tool by name, for a client whose list lacks it.
    async fn call_by_name(
        &self,
        mut arguments: Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let refuse = |message: String| CallToolResult::error(vec![ContentBlock::text(message)]);
        let name = match arguments.remove("tool") {
            Some(Value::String(name)) => name,
            _ => return refuse("state_call needs `tool`: the name of the tool to run".into()),
        };
        let args = match arguments.remove("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(Value::Object(args)) => Value::Object(args),
            Some(other) => return refuse(format!("`arguments` is the tool's arguments as an object, not {other}")),
        };
        if let Some(unknown) = arguments.keys().next() {
            return refuse(format!("unknown argument `{unknown}`; state_call takes `tool` and `arguments`"));
        }
        match self.tools.get(&name) {
            Some(op) => self.run(op, args, context).await,
            None if name == tools::DISCOVER_TOOL => match args {
                Value::Object(args) => self.discover(&args, context).await,
                _ => refuse("state_tools takes an object".into()),
            },
            None => refuse(format!("no tool `{name}`; this server's tools are: {}", self.tools.names().join(", "))),
        }
    }
}

pub(crate) fn in_session(context: &RequestContext<RoleServer>) -> bool {
    context.peer.peer_info().is_some()
}

/// Who a request is from. Over HTTP the transport attached the request's parts, holding the caller
/// the auth layer found; under stdio there are none, and the caller is a local process of
/// the same user.
pub(crate) fn caller(context: &RequestContext<RoleServer>) -> Caller {
    match context.extensions.get::<http::request::Parts>() {
        // Over HTTP: the caller the server authenticated, or one whose every call is refused.
        Some(parts) => parts.extensions.get::<Caller>().cloned().unwrap_or_else(Caller::nobody),
        // Over stdio: the process that started this one, as the same user.
        None => Caller::LocalUser,
    }
}

const INSTRUCTIONS: &str = "Durable, versioned key-value state shared by every agent using this server. \
Read with state_get; write with state_set passing expected_version from your read (0 = create only). \
A result with status \"conflict\" carries the current version and value: apply your change to that value and retry. \
Keys look like \"project/x/status\". Leases (lease_*) and workflow runs (workflow_*) hand out fencing tokens: \
pass them back, and a status \"fenced\" means you lost ownership. Guides: resources state://docs/usage, \
state://docs/coordination, state://docs/keys, state://docs/what-not-to-store. \
To wait for a change instead of polling, subscribe to state://kv/{key}, state://lease/{resource_id} or \
state://workflow/{run_id}, or call state_watch.";

/// Added when the list starts short.
const DISCOVER_INSTRUCTIONS: &str = " Tools not listed yet (leases, workflow runs, sessions, checkpoints, knowledge, \
history, admin) are one call away: state_tools enables them, state_call runs them.";

/// Added when checkpoint or knowledge tools are served.
const TEXT_INSTRUCTIONS: &str = " Checkpoints save where work stands so you, or another agent, resume there; \
saved knowledge is recalled by relevance within a token budget. The prompts when_to_checkpoint and \
when_to_recall say when to use them.";

impl ServerHandler for StateServer {
    fn get_info(&self) -> ServerConfig {
        let tools = ServerCapabilities::builder().enable_tools();
        let capabilities = if self.tools.discovers() { tools.enable_tool_list_changed() } else { tools }
            .enable_resources()
            .enable_resources_subscribe()
            .enable_prompts();
        ServerConfig::new(capabilities.build())
            .with_server_info(
                Implementation::new("state", env!("CARGO_PKG_VERSION"))
                    .with_title("state: durable shared state for AI agents"),
            )
            .with_instructions(self.instructions.as_ref())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let enabled = self.enabled(&context);
        let listed = ListToolsResult::with_all_items(self.tools.listed(&enabled));
        Ok(if enabled.is_empty() {
            listed.with_ttl_ms(LIST_TTL_MS).with_cache_scope(CacheScope::Public)
        } else {
            listed.with_ttl_ms(0).with_cache_scope(CacheScope::Private)
        })
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.definition(name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = request.arguments.unwrap_or_default();
        if self.tools.discovers() {
            match request.name.as_ref() {
                tools::DISCOVER_TOOL => return Ok(self.discover(&arguments, &context).await.into()),
                tools::CALL_TOOL => return Ok(self.call_by_name(arguments, &context).await.into()),
                _ => {}
            }
        }
        let Some(op) = self.tools.get(&request.name) else {
            return Err(McpError::invalid_params(
                format!("unknown tool `{}`; this server's tools are: {}", request.name, self.tools.names().join(", ")),
                Some(json!({"tool": request.name})),
            ));
        };
        Ok(self.run(op, Value::Object(arguments), &context).await.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(prompts::list(&self.tools))
            .with_ttl_ms(LIST_TTL_MS)
            .with_cache_scope(CacheScope::Public))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        match prompts::get(&self.tools, &request.name) {
            Some(prompt) => Ok(prompt.into()),
            None => Err(McpError::invalid_params(
                format!(
                    "unknown prompt `{}`; this server's prompts are: {}",
                    request.name,
                    prompts::list(&self.tools).iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
                None,
            )),
        }
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let (resources, next) = resources::list(&self.api, &caller(&context), &self.options, cursor).await?;
        let mut result =
            ListResourcesResult::with_all_items(resources).with_ttl_ms(0).with_cache_scope(CacheScope::Private);
        result.next_cursor = next;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(resources::templates(&self.options))
            .with_ttl_ms(LIST_TTL_MS)
            .with_cache_scope(CacheScope::Public))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let contents = resources::read(&self.api, &caller(&context), &self.options, &request.uri).await?;
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    /// Accepts the resource URIs this server can follow; list-changed notifications are not
    /// offered (the tool and template lists never change).
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        let mut accepted = requested.supported_by(&self.get_info().capabilities);
        if let Some(uris) = &mut accepted.resource_subscriptions {
            uris.retain(|uri| Target::parse(uri, &self.options).is_some());
        }
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let uris = context.accepted().resource_subscriptions.clone().unwrap_or_default();
        // Started before the acknowledgment went out (crate::service); followed here only if
        // this handler is driven some other way.
        let request = context.request_context();
        let started = request
            .extensions
            .get::<subscriptions::Started>()
            .or_else(|| request.extensions.get::<http::request::Parts>()?.extensions.get::<subscriptions::Started>())
            .and_then(|started| started.take());
        let followed = match started {
            Some(followed) => followed,
            None => self.follow_listened(context.accepted(), &caller(request)).await?,
        };
        let (changed, mut changes) = tokio::sync::mpsc::channel::<String>(64);
        let mut following = tokio::task::JoinSet::new();
        for resource in followed.into_iter().filter(|resource| uris.iter().any(|uri| uri == resource.uri())) {
            let changed = changed.clone();
            following.spawn(resource.forward(move |uri| {
                let changed = changed.clone();
                async move { changed.send(uri).await.is_ok() }
            }));
        }
        drop(changed);
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                uri = changes.recv() => match uri {
                    Some(uri) => {
                        if context.sink().notify_resource_updated(uri).await.is_err() {
                            return Ok(());
                        }
                    }
                    // Nothing left to follow (only docs, or the store closed): keep the stream
                    // until the client ends it, as the subscription is still theirs.
                    None => {
                        context.cancelled().await;
                        return Ok(());
                    }
                },
            }
        }
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if !self.subscriptions.has_room_for(&request.uri) {
            return Err(McpError::invalid_params(
                format!(
                    "this session already follows {} resources, the most one session may: unsubscribe from some first",
                    subscriptions::MAX_SUBSCRIBED
                ),
                None,
            ));
        }
        let followed = subscriptions::follow(&self.api, &caller(&context), &self.options, &request.uri).await?;
        let Some(resource) = followed else { return Ok(()) };
        let peer = context.peer.clone();
        let task = tokio::spawn(resource.forward(move |uri| {
            let peer = peer.clone();
            async move { peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri)).await.is_ok() }
        }));
        self.subscriptions.add(request.uri, task.abort_handle());
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscriptions.remove(&request.uri);
        Ok(())
    }
}
