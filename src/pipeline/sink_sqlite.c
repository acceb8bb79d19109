/*
 * pipeline/sink_sqlite.c - a SQLite database with one row per input.
 *
 * Table results(id TEXT PRIMARY KEY, ...) in input order (rowid), with the
 * fields of the JSONL rows: argmax INTEGER (and label TEXT), topk TEXT (the
 * JSON list), or outputs TEXT (the JSON object of every output).  The
 * checkpoint is the row 'state' of toplu_job(key TEXT PRIMARY KEY, value
 * TEXT), committed in the same transaction as the rows it counts; the
 * database is written as ".NAME.part" (WAL journal, synchronous=NORMAL)
 * and renamed to NAME when complete, after its journal is folded back in.
 *
 * With sqlite_table (s->table) the rows go to that table inside the
 * database NAME itself (a user's database, or a new file), nothing else in
 * it touched: no part file, no rename, the journal mode left as it is.  The
 * table is dropped (when it is toplu's, or with overwrite) and created in
 * the transaction of the first checkpoint; the checkpoint is the row
 * 'state:name' (lower case) of toplu_job, with extra {"table": NAME} so
 * that pl_sink_verify counts that table.
 */
#include <ctype.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "pipeline/files.h"
#include "pipeline/sink.h"

typedef struct sql_sink {
  char part[PL_PATH_MAX];
  const char *file;    /* the database written: part, or the output itself (sqlite_table) */
  char key[80];        /* the checkpoint's row in toplu_job: "state" or "state:name" */
  sqlite3 *db;
  sqlite3_stmt *insert;
  int in_txn;
  int n_cols; /* result columns after id */
} sql_sink_t;

/* Run SQL; TOPLU_ERR_IO with SQLite's message. */
static toplu_status_t exec(sqlite3 *db, const char *sql, const char *path, toplu_error_t *err) {
  char *msg = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    toplu__errorf(err, TOPLU_ERR_IO, "%s: %s (%s)", path, msg ? msg : sqlite3_errmsg(db), sql);
    sqlite3_free(msg);
    return TOPLU_ERR_IO;
  }
  return TOPLU_OK;
}

/* Read the checkpoint row of db; *found 0 when there is none. */
static toplu_status_t read_state(sqlite3 *db, const char *path, const char *key, pl_state_t *st, int *found,
                                 toplu_error_t *err) {
  *found = 0;
  sqlite3_stmt *q = NULL;
  if (sqlite3_prepare_v2(db, "SELECT value FROM toplu_job WHERE key = ?", -1, &q, NULL) != SQLITE_OK)
    return TOPLU_OK; /* no table: not a toplu job database */
  sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
  toplu_status_t r = TOPLU_OK;
  int rc = sqlite3_step(q);
  if (rc == SQLITE_ROW) {
    const char *text = (const char *)sqlite3_column_text(q, 0);
    r = pl_state_parse(text ? text : "", path, st, err);
    if (!r) *found = 1;
  } else if (rc != SQLITE_DONE) {
    r = toplu__errorf(err, TOPLU_ERR_IO, "%s: %s", path, sqlite3_errmsg(db));
  }
  sqlite3_finalize(q);
  return r;
}

/* Open a database file (flags: SQLITE_OPEN_*). */
static toplu_status_t open_db(const char *path, int flags, sqlite3 **db, toplu_error_t *err) {
  if (sqlite3_open_v2(path, db, flags, NULL) != SQLITE_OK) {
    toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot open: %s", path, *db ? sqlite3_errmsg(*db) : "out of memory");
    sqlite3_close(*db);
    *db = NULL;
    return TOPLU_ERR_IO;
  }
  sqlite3_busy_timeout(*db, 10000);
  return TOPLU_OK;
}

/* 1 when db's last error was another connection's lock (held past the busy timeout). */
static int db_locked(sqlite3 *db) {
  int ec = db ? sqlite3_errcode(db) : SQLITE_OK;
  return ec == SQLITE_BUSY || ec == SQLITE_LOCKED;
}

/* A database another connection held locked past the busy timeout: why says so (2: neither a job nor
 * overwrite can go on; before 2026-12-06 it was reported as "not an SQLite database", which asked for
 * overwrite). */
static int locked_why(const char *path, char *why, size_t why_size) {
  snprintf(why, why_size, "output %s is locked by another connection (SQLite: database is locked, waited 10 s); "
           "the job cannot read it: try again when the other writer is done", path);
  return 2;
}

/* sqlite_table: the checkpoint of the table in the database; a complete
 * one is checked against the table's row count. */
static toplu_status_t table_load_state(pl_sink_t *s, pl_state_t *st, int *found, toplu_error_t *err) {
  sql_sink_t *q = s->impl;
  if (!pl_exists(s->path)) return TOPLU_OK;
  sqlite3 *db = NULL;
  /* read-write: a job killed inside a transaction leaves a hot journal, which
   * only a connection that may write rolls back (a read-only one fails) */
  toplu_status_t r = open_db(s->path, SQLITE_OPEN_READWRITE, &db, err);
  if (r) return r;
  r = read_state(db, s->path, q->key, st, found, err);
  sqlite3_close(db);
  if (r || !*found) return r;
  char why[2 * PL_PATH_MAX];
  if (st->phase == PL_PHASE_COMPLETE && pl_sink_verify("sqlite", s->path, st, why, sizeof why)) {
    pl_state_free(st);
    *found = 0;
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "resume: the table %s in %s is not what its job wrote: %s; start over without resume", s->table,
                        s->path, why);
  }
  if (st->phase == PL_PHASE_FINISHING) st->phase = PL_PHASE_RUNNING; /* never written for a table; nothing to rename */
  return TOPLU_OK;
}

/* The checkpoint in the part database, or in a finished output. */
static toplu_status_t sql_load_state(pl_sink_t *s, pl_state_t *st, int *found, toplu_error_t *err) {
  sql_sink_t *q = s->impl;
  *found = 0;
  if (s->table) return table_load_state(s, st, found, err);
  const char *from = pl_exists(q->part) ? q->part : pl_exists(s->path) ? s->path : NULL;
  if (!from) return TOPLU_OK;
  sqlite3 *db = NULL;
  toplu_status_t r = open_db(from, from == q->part ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY, &db, err);
  if (r) return r;
  r = read_state(db, from, q->key, st, found, err);
  sqlite3_close(db);
  if (r || !*found) return r;
  if (from == s->path && st->phase != PL_PHASE_COMPLETE) { /* not ours to continue */
    pl_state_free(st);
    *found = 0;
  } else if (from == q->part && st->phase == PL_PHASE_COMPLETE) {
    st->phase = PL_PHASE_FINISHING; /* complete inside, not yet renamed */
  } else if (from == s->path) {
    char why[2 * PL_PATH_MAX];
    if (pl_sink_verify("sqlite", s->path, st, why, sizeof why)) {
      pl_state_free(st);
      *found = 0;
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "resume: the output %s is not what its job wrote: %s; start over without resume", s->path, why);
    }
  }
  return TOPLU_OK;
}

/* Remove a database file and its journals. */
static int remove_db(const char *path) {
  char p[PL_PATH_MAX + 16];
  int bad = pl_file_remove(path);
  static const char *sfx[] = {"-wal", "-shm", "-journal"};
  for (int i = 0; i < 3; i++) {
    snprintf(p, sizeof p, "%s%s", path, sfx[i]);
    bad |= pl_file_remove(p);
  }
  return bad;
}

/* Prepare the insert statement for the result columns. */
static toplu_status_t prepare_insert(pl_sink_t *s, toplu_error_t *err) {
  sql_sink_t *q = s->impl;
  char sql[160];
  snprintf(sql, sizeof sql, "INSERT INTO \"%s\" VALUES (?, ?%s)", s->table ? s->table : "results",
           q->n_cols == 2 ? ", ?" : "");
  if (sqlite3_prepare_v2(q->db, sql, -1, &q->insert, NULL) != SQLITE_OK)
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: %s", q->file, sqlite3_errmsg(q->db));
  return TOPLU_OK;
}

/* The CREATE TABLE of the results table (named table). */
static void create_sql(const pl_sink_t *s, const char *table, char *buf, size_t size) {
  const sql_sink_t *q = s->impl;
  const pl_post_t *p = s->post;
  if (p->kind == PL_POST_ARGMAX)
    snprintf(buf, size, "CREATE TABLE \"%s\"(id TEXT PRIMARY KEY, argmax INTEGER%s)", table,
             q->n_cols == 2 ? ", label TEXT" : "");
  else if (p->kind == PL_POST_TOPK) snprintf(buf, size, "CREATE TABLE \"%s\"(id TEXT PRIMARY KEY, topk TEXT)", table);
  else snprintf(buf, size, "CREATE TABLE \"%s\"(id TEXT PRIMARY KEY, outputs TEXT)", table);
}

/* The type ("table", "view", "index", "trigger") of the schema object
 * called name in any case, into type; "" when there is none; -1 when db is
 * not a database. */
static int object_type(sqlite3 *db, const char *name, char *type, size_t size) {
  sqlite3_stmt *q = NULL;
  type[0] = '\0';
  if (sqlite3_prepare_v2(db, "SELECT type FROM sqlite_master WHERE lower(name) = lower(?)", -1, &q, NULL) != SQLITE_OK)
    return -1;
  sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
  int rc = sqlite3_step(q);
  if (rc == SQLITE_ROW && sqlite3_column_text(q, 0)) snprintf(type, size, "%s", (const char *)sqlite3_column_text(q, 0));
  sqlite3_finalize(q);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

/* Rows of the table (-1 when it cannot be counted). */
static int64_t count_rows(sqlite3 *db, const char *table) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\"", table);
  sqlite3_stmt *q = NULL;
  int64_t n = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW) n = sqlite3_column_int64(q, 0);
  sqlite3_finalize(q);
  return n;
}

/* sqlite_table: open the database itself; fresh: (re)create the table
 * inside a transaction left open (committed with the first checkpoint);
 * resume: the table must hold the checkpoint's rows. */
static toplu_status_t table_begin(pl_sink_t *s, const pl_state_t *st, toplu_error_t *err) {
  sql_sink_t *q = s->impl;
  toplu_status_t r;
  char type[32];
  if (!st) {
    char dir[PL_PATH_MAX];
    pl_path_dir(s->path, dir, sizeof dir);
    if (!pl_is_dir(dir) && (r = pl_mkdir_p(dir, err))) return r;
  } else if (!pl_exists(s->path)) {
    return toplu__errorf(err, TOPLU_ERR_IO, "resume: %s is gone; start over without resume", s->path);
  }
  if ((r = open_db(s->path, SQLITE_OPEN_READWRITE | (st ? 0 : SQLITE_OPEN_CREATE), &q->db, err))) return r;
  if (object_type(q->db, s->table, type, sizeof type))
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: %s", s->path, sqlite3_errmsg(q->db));
  if (type[0] && strcmp(type, "table"))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "sqlite_table '%s': %s holds a%s %s of that name, not a table; choose another name", s->table,
                        s->path, !strcmp(type, "index") ? "n" : "", type);
  if (st) {
    int64_t n = type[0] ? count_rows(q->db, s->table) : -1;
    if (n != st->processed)
      return toplu__errorf(err, TOPLU_ERR_IO,
                          n < 0 ? "resume: the table %s is gone from %s (the checkpoint says %lld rows); start over "
                                  "without resume"
                                : "resume: the table %s in %s holds %lld rows, the checkpoint says %lld; start over "
                                  "without resume",
                          s->table, s->path, n < 0 ? (long long)st->processed : (long long)n, (long long)st->processed);
    return prepare_insert(s, err);
  }
  char drop[128], create[256];
  snprintf(drop, sizeof drop, "DROP TABLE IF EXISTS \"%s\"", s->table);
  create_sql(s, s->table, create, sizeof create);
  if ((r = exec(q->db, "BEGIN IMMEDIATE", s->path, err))) return r;
  q->in_txn = 1;
  if ((r = exec(q->db, "CREATE TABLE IF NOT EXISTS toplu_job(key TEXT PRIMARY KEY, value TEXT)", s->path, err)) ||
      (r = exec(q->db, drop, s->path, err)) || (r = exec(q->db, create, s->path, err)))
    return r;
  sqlite3_stmt *d = NULL;
  int rc = sqlite3_prepare_v2(q->db, "DELETE FROM toplu_job WHERE key = ?", -1, &d, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(d, 1, q->key, -1, SQLITE_STATIC);
    rc = sqlite3_step(d) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
  }
  sqlite3_finalize(d);
  if (rc != SQLITE_OK)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "%s: its table toplu_job is not toplu's (%s); the checkpoint of sqlite_table '%s' cannot be "
                        "kept there", s->path, sqlite3_errmsg(q->db), s->table);
  return prepare_insert(s, err);
}

/* Create the part database (fresh) or reopen it (resume). */
static toplu_status_t sql_begin(pl_sink_t *s, const pl_state_t *st, toplu_error_t *err) {
  sql_sink_t *q = s->impl;
  toplu_status_t r;
  if (s->table) return table_begin(s, st, err);
  if (!st) {
    char dir[PL_PATH_MAX];
    pl_path_dir(s->path, dir, sizeof dir);
    if (!pl_is_dir(dir) && (r = pl_mkdir_p(dir, err))) return r;
    if (remove_db(q->part) || remove_db(s->path))
      return toplu__errorf(err, TOPLU_ERR_IO, "cannot remove the earlier output %s or its part files: %s", s->path,
                          strerror(errno));
    if ((r = open_db(q->part, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &q->db, err))) return r;
    char create[256];
    create_sql(s, "results", create, sizeof create);
    if ((r = exec(q->db, "PRAGMA journal_mode=WAL", q->part, err)) || (r = exec(q->db, create, q->part, err)) ||
        (r = exec(q->db, "CREATE TABLE toplu_job(key TEXT PRIMARY KEY, value TEXT)", q->part, err)))
      return r;
  } else {
    if (!pl_exists(q->part))
      return toplu__errorf(err, TOPLU_ERR_IO, "resume: %s is gone; start over without resume", q->part);
    if ((r = open_db(q->part, SQLITE_OPEN_READWRITE, &q->db, err))) return r;
    if ((r = exec(q->db, "PRAGMA journal_mode=WAL", q->part, err))) return r;
  }
  if ((r = exec(q->db, "PRAGMA synchronous=NORMAL", q->part, err))) return r;
  return prepare_insert(s, err);
}

/* Each row as NUL-separated fields: id, then the result columns. */
static toplu_status_t sql_format(pl_sink_t *s, pl_chunk_t *c, toplu_error_t *err) {
  const pl_post_t *p = s->post;
  pl_buf_t *b = &c->out[0];
  for (int64_t i = 0; i < c->count; i++) {
    const pl_row_t *r = &c->rows[i];
    if (r->fail_stage) continue;
    pl_buf_append(b, r->id, strlen(r->id) + 1);
    if (p->kind == PL_POST_ARGMAX) {
      pl_buf_int(b, r->res.argmax);
      pl_buf_putc(b, '\0');
      if (p->n_labels) {
        const char *label = pl_post_label(p, r->res.argmax);
        pl_buf_append(b, label ? label : "", strlen(label ? label : "") + 1);
      }
    } else if (p->kind == PL_POST_TOPK) {
      pl_sink_json_topk(s, r, b);
      pl_buf_putc(b, '\0');
    } else {
      pl_sink_json_outputs(s, c, r, b);
      pl_buf_putc(b, '\0');
    }
  }
  if (b->oom) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory formatting results");
  return TOPLU_OK;
}

/* Insert a chunk's rows in the open transaction (begun here when none is). */
static toplu_status_t sql_write(pl_sink_t *s, pl_chunk_t *c, toplu_error_t *err) {
  sql_sink_t *q = s->impl;
  toplu_status_t r;
  if (!q->in_txn) {
    if ((r = exec(q->db, "BEGIN IMMEDIATE", q->file, err))) return r;
    q->in_txn = 1;
  }
  const char *p = c->out[0].data, *end = p + c->out[0].len;
  while (p && p < end) {
    const char *f[3];
    for (int k = 0; k <= q->n_cols; k++) {
      f[k] = p;
      p += strlen(p) + 1;
    }
    sqlite3_bind_text(q->insert, 1, f[0], -1, SQLITE_STATIC);
    if (s->post->kind == PL_POST_ARGMAX) sqlite3_bind_int64(q->insert, 2, strtoll(f[1], NULL, 10));
    else sqlite3_bind_text(q->insert, 2, f[1], -1, SQLITE_STATIC);
    if (q->n_cols == 2) sqlite3_bind_text(q->insert, 3, f[2], -1, SQLITE_STATIC);
    int rc = sqlite3_step(q->insert);
    sqlite3_reset(q->insert);
    if (rc != SQLITE_DONE)
      return toplu__errorf(err, TOPLU_ERR_IO, "%s: inserting row '%s': %s", q->file, f[0], sqlite3_errmsg(q->db));
  }
  return TOPLU_OK;
}

/* Store st in toplu_job and commit the open transaction. */
static toplu_status_t store_state(pl_sink_t *s, const pl_state_t *st, toplu_error_t *err) {
  sql_sink_t *q = s->impl;
  toplu_status_t r;
  if (!q->in_txn) {
    if ((r = exec(q->db, "BEGIN IMMEDIATE", q->file, err))) return r;
    q->in_txn = 1;
  }
  char *text = pl_state_dump(st);
  if (!text) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory writing the checkpoint of %s", s->path);
  sqlite3_stmt *u = NULL;
  int rc = sqlite3_prepare_v2(q->db, "INSERT OR REPLACE INTO toplu_job(key, value) VALUES (?, ?)", -1, &u, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(u, 1, q->key, -1, SQLITE_STATIC);
    sqlite3_bind_text(u, 2, text, -1, SQLITE_STATIC);
    rc = sqlite3_step(u) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
  }
  sqlite3_finalize(u);
  free(text);
  if (rc != SQLITE_OK) return toplu__errorf(err, TOPLU_ERR_IO, "%s: saving the checkpoint: %s", q->file, sqlite3_errmsg(q->db));
  if ((r = exec(q->db, "COMMIT", q->file, err))) return r;
  q->in_txn = 0;
  return TOPLU_OK;
}

/* Commit the rows with the checkpoint. */
static toplu_status_t sql_commit(pl_sink_t *s, pl_state_t *st, toplu_error_t *err) {
  st->n_files = 0;
  if (s->table) { /* the table the rows are in, for pl_sink_verify */
    json_decref(st->extra);
    st->extra = json_pack("{s:s}", "table", s->table);
    if (!st->extra) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory writing the checkpoint of %s", s->path);
  }
  return store_state(s, st, err);
}

/* Mark complete, fold the WAL back, rename the part into place. */
static toplu_status_t sql_finish(pl_sink_t *s, pl_state_t *st, toplu_error_t *err) {
  sql_sink_t *q = s->impl;
  toplu_status_t r;
  if (s->table) { /* mark the table's checkpoint complete: nothing to rename */
    if (!q->db && (r = open_db(s->path, SQLITE_OPEN_READWRITE, &q->db, err))) return r;
    st->phase = PL_PHASE_COMPLETE;
    if ((r = sql_commit(s, st, err))) return r;
    sqlite3_finalize(q->insert);
    q->insert = NULL;
    if (sqlite3_close(q->db) != SQLITE_OK)
      return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot close: %s", s->path, sqlite3_errmsg(q->db));
    q->db = NULL;
    return TOPLU_OK;
  }
  if (pl_exists(q->part)) {
    if (!q->db && (r = open_db(q->part, SQLITE_OPEN_READWRITE, &q->db, err))) return r;
    st->phase = PL_PHASE_COMPLETE;
    st->n_files = 0;
    if ((r = store_state(s, st, err))) return r;
    sqlite3_finalize(q->insert);
    q->insert = NULL;
    /* Fold the WAL back into the database file, so the file alone is the result. */
    if ((r = exec(q->db, "PRAGMA journal_mode=DELETE", q->part, err))) return r;
    if (sqlite3_close(q->db) != SQLITE_OK)
      return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot close: %s", q->part, sqlite3_errmsg(q->db));
    q->db = NULL;
    if ((r = pl_file_publish(q->part, s->path, err))) return r;
  } else if (!pl_exists(s->path)) {
    return toplu__errorf(err, TOPLU_ERR_IO, "resume: neither %s nor %s exists; start over without resume",
                        q->part, s->path);
  }
  st->phase = PL_PHASE_COMPLETE;
  return TOPLU_OK;
}

/* Roll back what is not committed and close. */
static void sql_destroy(pl_sink_t *s) {
  sql_sink_t *q = s->impl;
  if (!q) return;
  sqlite3_finalize(q->insert);
  if (q->db) {
    if (q->in_txn) sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(q->db);
  }
  free(q);
  s->impl = NULL;
}

/* An existing database is toplu's when it holds a checkpoint row and only
 * the tables results and toplu_job; anything else (a user's database, a
 * file that is not SQLite) is not replaced without overwrite. */
static int sql_foreign(pl_sink_t *s, char *why, size_t why_size) {
  if (!s->table) return pl_sink_sqlite_foreign(s->path, why, why_size);
  /* sqlite_table: only the table is replaced; it is toplu's when its checkpoint row is there */
  if (!pl_exists(s->path)) return 0;
  sql_sink_t *q = s->impl;
  sqlite3 *db = NULL;
  toplu_error_t e;
  char type[32];
  int bad = 0, found = 0;
  pl_state_t st;
  int unread = open_db(s->path, SQLITE_OPEN_READWRITE, &db, &e) || object_type(db, s->table, type, sizeof type);
  if (unread && db_locked(db)) {
    bad = locked_why(s->path, why, why_size);
  } else if (unread) { /* see table_load_state */
    snprintf(why, why_size, "output %s exists and is not an SQLite database; the job would write its table %s into it",
             s->path, s->table);
    bad = 1;
  } else if (type[0] && strcmp(type, "table")) {
    snprintf(why, why_size, "output %s holds a%s %s named %s, not a table; choose another sqlite_table", s->path,
             !strcmp(type, "index") ? "n" : "", type, s->table);
    bad = 2; /* not the job's to replace, overwrite or not */
  } else if (type[0]) {
    if (read_state(db, s->path, q->key, &st, &found, &e) == TOPLU_OK && found) pl_state_free(&st);
    if (!found) {
      snprintf(why, why_size, "output table %s in %s exists and no toplu job wrote it (no checkpoint row '%s' in a table "
               "toplu_job); the job would replace that table (its other tables are left alone)", s->table, s->path,
               q->key);
      bad = 1;
    }
  }
  sqlite3_close(db);
  return bad;
}

int pl_sink_sqlite_foreign(const char *path, char *why, size_t why_size) {
  if (!pl_exists(path)) return 0;
  sqlite3 *db = NULL;
  toplu_error_t e;
  pl_state_t st;
  int found = 0, other = 0;
  char tables[256] = "";
  size_t used = 0;
  if (open_db(path, SQLITE_OPEN_READONLY, &db, &e) == TOPLU_OK) {
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", -1, &q, NULL) ==
        SQLITE_OK) {
      while (sqlite3_step(q) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(q, 0);
        if (!name || !strcmp(name, "results") || !strcmp(name, "toplu_job")) continue;
        if (used < sizeof tables)
          used += (size_t)snprintf(tables + used, sizeof tables - used, "%s%s", other ? ", " : "", name);
        other++;
      }
    } else {
      other = db_locked(db) ? -2 : -1; /* locked, or not a database */
    }
    sqlite3_finalize(q);
    if (other == 0 && read_state(db, path, "state", &st, &found, &e) == TOPLU_OK && found) pl_state_free(&st);
    sqlite3_close(db);
  } else {
    other = -1;
  }
  if (other == 0 && found) return 0;
  if (other == -2) return locked_why(path, why, why_size);
  if (other > 0)
    snprintf(why, why_size, "output %s is a database no toplu job wrote (it holds the table%s %s); the job would replace "
             "it with its own", path, other > 1 ? "s" : "", tables);
  else if (other < 0)
    snprintf(why, why_size, "output %s exists and is not an SQLite database; the job would replace it", path);
  else
    snprintf(why, why_size, "output %s is a database no toplu job wrote (no checkpoint in a table toplu_job); the job "
             "would replace it", path);
  return 1;
}

static const pl_sink_ops_t sql_ops = {"sqlite", sql_load_state, sql_begin, sql_format, sql_write,
                                      sql_commit, sql_finish, sql_destroy, sql_foreign};

toplu_status_t pl_sink_sqlite_open(pl_sink_t *s, toplu_error_t *err) {
  sql_sink_t *q = calloc(1, sizeof *q);
  if (!q) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the sink %s", s->path);
  s->impl = q;
  s->ops = &sql_ops;
  q->n_cols = s->post->kind == PL_POST_ARGMAX && s->post->n_labels ? 2 : 1;
  q->file = s->table ? s->path : q->part;
  snprintf(q->key, sizeof q->key, "state");
  if (s->table) {
    char why[128];
    if (pl_sink_sqlite_table_bad(s->table, why, sizeof why))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "sqlite_table '%.200s': %s", s->table, why);
    size_t n = (size_t)snprintf(q->key, sizeof q->key, "state:%s", s->table);
    for (size_t i = 6; i < n; i++) q->key[i] = (char)tolower((unsigned char)q->key[i]);
  }
  if (pl_is_dir(s->path)) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "output %s is a directory", s->path);
  if (pl_path_hidden(s->path, ".part", q->part, sizeof q->part))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "output %s: path longer than %d bytes", s->path, PL_PATH_MAX - 1);
  return TOPLU_OK;
}

int pl_sink_sqlite_table_bad(const char *name, char *why, size_t why_size) {
  size_t n = strlen(name);
  const char *problem = NULL;
  if (!n) problem = "empty; expected an SQL identifier (a letter or '_', then letters, digits and '_')";
  else if (n > 64) problem = "longer than 64 bytes";
  else if (!isalpha((unsigned char)name[0]) && name[0] != '_')
    problem = "not an SQL identifier: it must start with a letter or '_' (then letters, digits and '_')";
  for (size_t i = 1; !problem && i < n; i++)
    if (!isalnum((unsigned char)name[i]) && name[i] != '_')
      problem = "not an SQL identifier: only letters, digits and '_' may follow its first character";
  if (!problem && !strcasecmp(name, "toplu_job")) problem = "toplu_job holds the checkpoints; choose another name";
  if (!problem && !strncasecmp(name, "sqlite_", 7)) problem = "names starting with sqlite_ are SQLite's own";
  if (!problem) return 0;
  snprintf(why, why_size, "%s", problem);
  return 1;
}

int pl_sink_sqlite_table_only(const char *path, char *why, size_t why_size) {
  sqlite3 *db = NULL;
  sqlite3_stmt *q = NULL;
  int only = 0;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(db,
                         "SELECT sum(key = 'state'), sum(key LIKE 'state:%'), "
                         "min(CASE WHEN key LIKE 'state:%' THEN substr(key, 7) END) FROM toplu_job",
                         -1, &q, NULL) == SQLITE_OK &&
      sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int64(q, 0) == 0 && sqlite3_column_int64(q, 1) > 0) {
    const char *t = (const char *)sqlite3_column_text(q, 2);
    snprintf(why, why_size, "%s holds the results of a job run with sqlite_table (its table %s), not a whole database", path,
             t ? t : "?");
    only = 1;
  }
  sqlite3_finalize(q);
  sqlite3_close(db);
  return only;
}
