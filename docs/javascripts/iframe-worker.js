// The site's search on file:// pages. Material runs its search in a Web Worker, and Chromium refuses
// `new Worker(url)` for file:// URLs, so a site opened from disk stays at "Initializing search". Here (file://
// only) `Worker` is replaced by one that runs the worker script in a hidden iframe and passes messages with
// postMessage. The file name contains "iframe-worker" because Material's offline plugin adds such a shim from a
// CDN unless the site names one of its own (mkdocs.yml: extra.polyfills); this one works without a network.
(function () {
  "use strict";
  if (location.protocol !== "file:") {
    return;
  }
  // runs first in the iframe: the worker script's postMessage goes to the page, the page's messages arrive as
  // the "message" events the worker script listens to
  var BRIDGE = "self.postMessage = function (data) { parent.postMessage({ fromFileWorker: true, data: data }, '*'); };";

  var PAGE_POST = window.postMessage;

  function FileWorker(url) {
    var target = document.createElement("span");  // an EventTarget to hand the page's "message" events to
    var frame = document.createElement("iframe");
    var queue = [];
    var ready = false;
    frame.hidden = true;
    frame.setAttribute("aria-hidden", "true");
    frame.srcdoc = "<script>" + BRIDGE + "<\/script><script src=\"" + new URL(url, document.baseURI).href +
      "\"><\/script>";
    window.addEventListener("message", function (event) {
      if (event.source === frame.contentWindow && event.data && event.data.fromFileWorker) {
        target.dispatchEvent(new MessageEvent("message", { data: event.data.data }));
      }
    });
    // the iframe's own postMessage now sends to the page: messages for the worker script go through the page's
    // (Window's postMessage is an own property of each window, not on Window.prototype)
    function send(data) {
      PAGE_POST.call(frame.contentWindow, data, "*");
    }
    frame.addEventListener("load", function () {
      ready = true;
      queue.splice(0).forEach(send);
    });
    (document.body || document.documentElement).appendChild(frame);
    this.postMessage = function (data) {
      if (ready) {
        send(data);
      } else {
        queue.push(data);
      }
    };
    this.addEventListener = target.addEventListener.bind(target);
    this.removeEventListener = target.removeEventListener.bind(target);
    this.terminate = function () { frame.remove(); };
  }

  window.Worker = FileWorker;
})();
