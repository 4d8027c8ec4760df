// Makes Azurite answer a request only once what the request changed is in its data files, so
// that a crash of Azurite (SIGKILL, out of memory, a closed terminal) loses nothing it
// acknowledged. Loaded with `node --require` before Azurite (devhost/azurite.py does it for a
// kept data folder); Azurite's own files are left as they are.
//
// Why: Azurite keeps tables, queue messages and the index of its message files in LokiJS
// databases held in memory, written to disk every 5 seconds (an interval fixed in its code, with
// no option or environment variable to change it). A crash loses the last seconds of answered
// writes: entities, sent messages, deletions, receipts.
//
// How, in two parts:
// 1. LokiJS's file adapter writes synchronously (same files: a temporary one renamed over the
//    database), so a save is complete when it returns and never races another one.
// 2. A response's bytes are held while any database has unsaved changes; the held responses are
//    released together after one save, once per turn of the event loop (a group commit: one
//    save covers every request answered in that turn). A response that reveals nothing new (no
//    unsaved change anywhere) goes out at once.
// Message bodies go to Azurite's extent files before the message is recorded, as before, so the
// record saved here never points at data that is not yet written.
// What this does not cover: the machine itself losing power (nothing is fsynced; the operating
// system writes its cache to disk later).
"use strict";

const fs = require("fs");
const http = require("http");
const path = require("path");

// Azurite's own copy of LokiJS, resolved from Azurite's entry script (process.argv[1]).
const Loki = require(require.resolve("lokijs", { paths: [path.dirname(process.argv[1])] }));
if (
  typeof Loki.LokiFsAdapter?.prototype?.saveDatabase !== "function" ||
  typeof Loki.prototype.configureOptions !== "function" ||
  typeof Loki.prototype.autosaveDirty !== "function"
) {
  throw new Error("azurite-durable: this LokiJS is not the one it was written for (1.5)");
}

// Every database persisted to files: the ones whose unsaved changes hold responses back.
const databases = new Set();
let lastSaveError = null;

Loki.LokiFsAdapter.prototype.saveDatabase = function saveDatabase(dbname, dbstring, callback) {
  const temporary = dbname + "~";
  try {
    fs.writeFileSync(temporary, dbstring);
    fs.renameSync(temporary, dbname);
  } catch (error) {
    lastSaveError = error;
    callback(error);
    return;
  }
  callback(null);
};

const configureOptions = Loki.prototype.configureOptions;
Loki.prototype.configureOptions = function (options, initialConfig) {
  const result = configureOptions.call(this, options, initialConfig);
  if (this.persistenceMethod === "fs") {
    databases.add(this);
  }
  return result;
};

function unsaved() {
  for (const database of databases) {
    if (database.autosaveDirty()) {
      return true;
    }
  }
  return false;
}

const HELD = Symbol("held until saved");
let held = [];
let failing = false;

function saveAndRelease() {
  const releasing = held;
  held = [];
  let failure = null;
  for (const database of databases) {
    if (!database.autosaveDirty()) {
      continue;
    }
    lastSaveError = null;
    database.saveDatabase();
    if (lastSaveError !== null) {
      failure = lastSaveError;
      // LokiJS cleared the flags before writing: set one again, so the next turn tries again.
      if (database.collections.length > 0) {
        database.collections[0].dirty = true;
      }
    }
  }
  for (const [response] of releasing) {
    response[HELD] = false;
  }
  for (const [response, original, args] of releasing) {
    if (failure !== null) {
      // Never acknowledge what is not on disk: the client sees a broken connection and retries.
      response.destroy(failure);
    } else {
      original.apply(response, args);
    }
  }
  // Said once per run of failures: whoever started Azurite may not read its stderr, and a full
  // pipe would stop it.
  if (failure !== null && !failing) {
    process.stderr.write(`azurite-durable: saving failed, answers dropped until it works: ${failure}\n`);
  } else if (failure === null && failing) {
    process.stderr.write("azurite-durable: saving works again\n");
  }
  failing = failure !== null;
}

// write() as well as end(): Azurite writes a response's body before it ends it, and a client
// that knows the length takes the response as complete once the body has arrived.
for (const method of ["write", "end"]) {
  const original = http.ServerResponse.prototype[method];
  http.ServerResponse.prototype[method] = function (...args) {
    if (!this[HELD] && !unsaved()) {
      return original.apply(this, args);
    }
    // Once held, the rest of this response queues behind, in order.
    this[HELD] = true;
    if (held.length === 0) {
      setImmediate(saveAndRelease);
    }
    held.push([this, original, args]);
    return method === "end" ? this : true;
  };
}
