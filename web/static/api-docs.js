// The API reference page (/api-docs): Swagger UI over the gateway's own schema. Its files come from the
// server (the swagger-ui-bundle-v2 package), never from a CDN.
document.addEventListener("DOMContentLoaded", function () {
  var root = document.getElementById("swagger-ui");
  if (!root || !window.SwaggerUIBundle) return;
  window.ui = SwaggerUIBundle({
    url: root.dataset.schema,
    dom_id: "#swagger-ui",
    deepLinking: true,
    docExpansion: "list",
    defaultModelsExpandDepth: 0,
    persistAuthorization: false,
    validatorUrl: null,
  });
});
