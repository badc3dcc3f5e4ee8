// Starts GraphiQL on the caddy-posts page. This is a file of its own, not an inline script, so
// that the page's Content-Security-Policy can refuse inline scripts.
(function () {
  'use strict';

  var exampleQuery = [
    '# Reading posts needs no credential; creating,',
    '# changing and deleting them do. Give yours in',
    '# the Headers tab below, as JSON:',
    '#   {"Authorization": "Bearer <token>"}',
    '# or',
    '#   {"Authorization": "ApiKey <key>"}',
    '# Headers stay in this tab; they are not saved.',
    '',
    '{',
    '  posts(limit: 5) {',
    '    id',
    '    title',
    '    createdAt',
    '    author {',
    '      name',
    '    }',
    '  }',
    '}',
    '',
  ].join('\n');

  // GraphiQL's dialogs lock page scrolling with a <style> element they add (react-remove-scroll),
  // which reads its nonce from this global. The server puts a fresh nonce on this script's tag
  // and in the page's style-src, so no 'unsafe-inline' is needed.
  window.__webpack_nonce__ = document.currentScript.nonce;

  // shouldPersistHeaders: false keeps headers out of the saved tabs, but GraphiQL 3 still saves
  // them with each entry of its query history. Headers may hold a token or an API key, so every
  // "headers" member is blanked on its way to localStorage.
  var prefix = 'graphiql:';
  function withoutHeaders(value) {
    var parsed;
    try {
      parsed = JSON.parse(value);
    } catch (e) {
      return value;
    }
    var found = false;
    (function blank(v) {
      if (v === null || typeof v !== 'object') return;
      Object.keys(v).forEach(function (k) {
        if (k === 'headers' && typeof v[k] === 'string') {
          v[k] = null;
          found = true;
        } else {
          blank(v[k]);
        }
      });
    })(parsed);
    return found ? JSON.stringify(parsed) : value;
  }
  var storage = {
    getItem: function (key) { return localStorage.getItem(key); },
    setItem: function (key, value) { localStorage.setItem(key, withoutHeaders(value)); },
    removeItem: function (key) { localStorage.removeItem(key); },
    get length() {
      return Object.keys(localStorage).filter(function (k) { return k.indexOf(prefix) === 0; }).length;
    },
    clear: function () {
      Object.keys(localStorage).forEach(function (k) {
        if (k.indexOf(prefix) === 0) localStorage.removeItem(k);
      });
    },
  };

  // Subscriptions go over a WebSocket to the same URL (graphql-transport-ws, with the Headers
  // tab as the connection_init payload). The scheme follows the page's, as the browser loaded it:
  // wss behind HTTPS, even where a proxy in front of Caddy ended the TLS.
  var here = window.location;
  var fetcher = GraphiQL.createFetcher({
    // The page's own path, without its query string: /graphql, or /prefix/graphql when Caddy
    // mounts the module under a prefix.
    url: here.pathname,
    subscriptionUrl: (here.protocol === 'https:' ? 'wss://' : 'ws://') + here.host + here.pathname,
    // The server answers every request with one JSON result (no @defer or @stream), so plain
    // JSON is asked for rather than multipart/mixed.
    enableIncrementalDelivery: false,
    headers: { accept: 'application/graphql-response+json, application/json' },
  });

  // Styles set through the DOM, which the Content-Security-Policy allows without a nonce.
  var container = document.getElementById('graphiql');
  document.body.style.margin = '0';
  container.style.height = '100vh';

  ReactDOM.createRoot(container).render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      storage: storage,
      defaultQuery: exampleQuery,
      isHeadersEditorEnabled: true,
      defaultEditorToolsVisibility: 'headers',
      shouldPersistHeaders: false,
    })
  );
})();
