//! What a Redis journal says and runs: its two scripts (the only writes it makes to keys,
//! each checking the journal's identity first), and the texts of its refusals. Python's
//! `RedisJournal` over a client given (`fxpay/journals.py`) runs the same scripts, read from
//! here (`fxpay._fxpay._redis_scripts`), so that both share a journal.

/// The error a script answers when the journal's identity key does not hold the identity
/// this process opened (flushed, restarted empty, created again): nothing is written.
pub(crate) const NOT_THIS_JOURNAL: &str = "FXPAYJOURNAL";

/// KEYS: entry key, open-keys set, identity key. ARGV: entry text, key, identity. Claims
/// with SET NX, in the journal this process opened only.
pub(crate) const CLAIM: &str = "
local id = redis.call('GET', KEYS[3])
if id ~= ARGV[3] then
  return redis.error_reply('FXPAYJOURNAL ' .. (id or ''))
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  redis.call('SADD', KEYS[2], ARGV[2])
  return false
end
return redis.call('GET', KEYS[1])
";

/// KEYS: entry key, open-keys set, result index key (or ''), identity key. ARGV: old text,
/// new text, key, new state, identity.
pub(crate) const SWAP: &str = "
local id = redis.call('GET', KEYS[4])
if id ~= ARGV[5] then
  return redis.error_reply('FXPAYJOURNAL ' .. (id or ''))
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2])
if ARGV[4] == 'pending' or ARGV[4] == 'unknown' then
  redis.call('SADD', KEYS[2], ARGV[3])
else
  redis.call('SREM', KEYS[2], ARGV[3])
end
if KEYS[3] ~= '' then
  redis.call('SET', KEYS[3], ARGV[3])
end
return 1
";

/// `s` as Python's `repr` shows a str (the texts are Python's own).
pub(crate) fn repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

const CREATE: &str = "RedisJournal(url).create()";

/// What to do about a journal that is not there.
fn lost_journal_advice() -> String {
    format!(
        "A journal is made once, by hand or in a deployment's migration step: {CREATE}, or \
         `python -m fxpay journal create URL`; never at every start-up. If a journal was here and \
         was lost (flushed, truncated, restarted without its data, replaced by a new server), \
         restore it from a backup first: creating a new one where a journal was lost sends \
         every key it held again. Nothing was sent."
    )
}

/// A Redis that holds no journal under the prefix.
pub(crate) fn no_journal(prefix: &str, id_key: &str) -> String {
    format!(
        "RedisJournal found no journal under prefix {} in this Redis (no {} key): opening a \
         journal never creates one. {}",
        repr(prefix),
        repr(id_key),
        lost_journal_advice()
    )
}

/// The identity this process opened is gone (`found` empty) or another one's (`found`).
pub(crate) fn not_this_journal(prefix: &str, id_key: &str, found: &str, mine: &str) -> String {
    if found.is_empty() {
        return format!(
            "RedisJournal's identity key {} is gone from this Redis (FLUSHALL or FLUSHDB, a key \
             evicted or deleted, a restart without its data): the journal this process opened \
             was lost, and it is not taken for a new one. {}",
            repr(id_key),
            lost_journal_advice()
        );
    }
    format!(
        "RedisJournal: this Redis now holds another journal under prefix {} ({found}) than the \
         one this process opened ({mine}): the journal was lost and made again while this \
         process ran, and its keys are not this journal's. Restart the processes that use it \
         once a person has checked what was lost. Nothing was sent.",
        repr(prefix)
    )
}

pub(crate) fn replica(role: &str) -> String {
    format!(
        "RedisJournal refuses this Redis: it is a replica (ROLE {role}), whose writes are lost \
         when it resyncs with its primary, and every key claimed there could be sent again. \
         Give the journal the primary. Nothing was sent."
    )
}

pub(crate) fn forgets(appendonly: &str) -> String {
    let shown = if appendonly.is_empty() {
        "'not set'".to_owned()
    } else {
        repr(appendonly)
    };
    format!(
        "RedisJournal refuses this Redis: its appendonly setting is {shown}, so it forgets every \
         key when it restarts, and every payment claimed before would be sent again. Set \
         'appendonly yes' and 'appendfsync always' (redis.conf, or CONFIG SET and CONFIG \
         REWRITE), or give RedisJournal(require_persistence=False) for a Redis whose keys may \
         be lost (tests). Nothing was sent."
    )
}

pub(crate) fn role_unread(e: &str) -> String {
    format!("RedisJournal cannot read the Redis server's ROLE ({e}); it is trusted to be a primary")
}

pub(crate) fn config_unread(e: &str) -> String {
    format!(
        "RedisJournal cannot read the Redis server's persistence settings (CONFIG GET refused: \
         {e}); it is trusted to keep every write across a restart (appendonly yes, appendfsync \
         always)"
    )
}

pub(crate) fn fsync_late(appendfsync: &str) -> String {
    let shown = if appendfsync.is_empty() {
        "unset"
    } else {
        appendfsync
    };
    format!(
        "RedisJournal: this Redis has appendfsync {shown}, so a power cut or a crash of its host \
         can lose the claims of the last second, and their payments could be sent again; use \
         appendfsync always"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_is_pythons() {
        assert_eq!(repr("fxpay:journal:"), "'fxpay:journal:'");
        assert_eq!(repr("it's"), "\"it's\"");
        assert_eq!(repr("a'b\"c\\"), "'a\\'b\"c\\\\'");
    }
}
