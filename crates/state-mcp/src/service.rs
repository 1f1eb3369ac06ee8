//! [`McpService`]: the handler as rmcp drives it over stdio, with a listen's watches started
//! before the listen is acknowledged. (Over HTTP, rmcp needs the handler itself; state-http
//! starts them in a middleware, through `StateServer::start_listen`.)
//!
//! rmcp sends `notifications/subscriptions/acknowledged` before it calls
//! `ServerHandler::listen`. A watch started in `listen` begins at the store's revision of that
//! moment, so a write made by a client that acted on the acknowledgment could land first and
//! never be announced. Here a `subscriptions/listen` request's resources are followed first;
//! `listen` takes them from the request's extensions.

use std::borrow::Cow;
use std::future::Future;

use rmcp::model::{ClientNotification, ClientRequest, ProtocolVersion, ServerConfig, ServerResult};
use rmcp::service::{NotificationContext, RequestContext, Service};
use rmcp::{ErrorData as McpError, RoleServer};

use crate::server::{StateServer, caller, in_session};
use crate::subscriptions::Started;

/// One session's (or one stateless request's) [`StateServer`], as rmcp serves it.
#[derive(Clone)]
pub(crate) struct McpService {
    handler: StateServer,
}

impl McpService {
    pub(crate) fn new(handler: StateServer) -> McpService {
        McpService { handler }
    }
}

impl Service<RoleServer> for McpService {
    async fn handle_request(
        &self,
        request: ClientRequest,
        mut context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, McpError> {
        // A legacy session has no `subscriptions/listen`: rmcp refuses it, nothing to start.
        if let ClientRequest::SubscriptionsListenRequest(listen) = &request
            && !in_session(&context)
        {
            // Refused here, before anything is acknowledged, if one resource cannot be followed.
            let followed = self.handler.follow_listened(&listen.params.notifications, &caller(&context)).await?;
            context.extensions.insert(Started::new(followed));
        }
        Service::handle_request(&self.handler, request, context).await
    }

    fn handle_notification(
        &self,
        notification: ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> impl Future<Output = Result<(), McpError>> + Send + '_ {
        Service::handle_notification(&self.handler, notification, context)
    }

    fn get_info(&self) -> ServerConfig {
        Service::get_info(&self.handler)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Service::supported_protocol_versions(&self.handler)
    }
}
