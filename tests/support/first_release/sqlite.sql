PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE memory_heads (
	scope_id VARCHAR(256) NOT NULL, 
	revision INTEGER NOT NULL, 
	updated_at BIGINT NOT NULL, 
	PRIMARY KEY (scope_id)
);
INSERT INTO memory_heads VALUES('git:example.com/acme/api',3,1767225600091);
CREATE TABLE memory_revisions (
	scope_id VARCHAR(256) NOT NULL, 
	revision INTEGER NOT NULL, 
	operation VARCHAR(16) NOT NULL, 
	entry_id VARCHAR(128) NOT NULL, 
	entry_version_id VARCHAR(128) NOT NULL, 
	created_at BIGINT NOT NULL, 
	PRIMARY KEY (scope_id, revision)
);
INSERT INTO memory_revisions VALUES('git:example.com/acme/api',1,'remember','mem_ent_00000000000000000005','mem_ver_00000000000000000006',1767225600042);
INSERT INTO memory_revisions VALUES('git:example.com/acme/api',2,'remember','mem_ent_00000000000000000007','mem_ver_00000000000000000008',1767225600063);
INSERT INTO memory_revisions VALUES('git:example.com/acme/api',3,'revise','mem_ent_00000000000000000007','mem_ver_00000000000000000009',1767225600084);
CREATE TABLE memory_entries (
	scope_id VARCHAR(256) NOT NULL, 
	entry_id VARCHAR(128) NOT NULL, 
	created_revision INTEGER NOT NULL, 
	current_version_id VARCHAR(128) NOT NULL, 
	current_version INTEGER NOT NULL, 
	state VARCHAR(16) NOT NULL, 
	content_hash VARCHAR(64) NOT NULL, 
	PRIMARY KEY (scope_id, entry_id)
);
INSERT INTO memory_entries VALUES('git:example.com/acme/api','mem_ent_00000000000000000005',1,'mem_ver_00000000000000000006',1,'active','e02ebf6bc8e9240d76261aacb4503f16513e8f44dfbfbd4ce4c9ae55fa09a78a');
INSERT INTO memory_entries VALUES('git:example.com/acme/api','mem_ent_00000000000000000007',2,'mem_ver_00000000000000000009',2,'active','639ce305470a230b95e4a69442abc62fdebd3bda2fe2ffa6beb156c989252896');
CREATE TABLE memory_versions (
	id INTEGER NOT NULL, 
	scope_id VARCHAR(256) NOT NULL, 
	entry_id VARCHAR(128) NOT NULL, 
	entry_version_id VARCHAR(128) NOT NULL, 
	version INTEGER NOT NULL, 
	kind VARCHAR(128) NOT NULL, 
	text TEXT NOT NULL, 
	tags TEXT NOT NULL, 
	reason TEXT, 
	source_refs TEXT NOT NULL, 
	artifact_refs TEXT NOT NULL, 
	content_hash VARCHAR(64) NOT NULL, 
	state VARCHAR(16) NOT NULL, 
	valid_from INTEGER NOT NULL, 
	valid_to INTEGER, 
	created_at BIGINT NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_memory_versions_id UNIQUE (scope_id, entry_version_id), 
	CONSTRAINT uq_memory_versions_entry UNIQUE (scope_id, entry_id, version)
);
INSERT INTO memory_versions VALUES(1,'git:example.com/acme/api','mem_ent_00000000000000000005','mem_ver_00000000000000000006',1,'fact','Deploys go through the blue green switch.','["deploy"]',NULL,'[]','[]','e02ebf6bc8e9240d76261aacb4503f16513e8f44dfbfbd4ce4c9ae55fa09a78a','active',1,NULL,1767225600035);
INSERT INTO memory_versions VALUES(2,'git:example.com/acme/api','mem_ent_00000000000000000007','mem_ver_00000000000000000008',1,'procedure','Rotate the signing keys every month.','[]',NULL,'[]','[]','28e46a44f4d007792b21008e46bc470599ab210aa79456cbd7d094efd45897e6','active',2,3,1767225600056);
INSERT INTO memory_versions VALUES(3,'git:example.com/acme/api','mem_ent_00000000000000000007','mem_ver_00000000000000000009',2,'procedure','Rotate the signing keys on the first Monday of every month.','[]',NULL,'[]','[]','639ce305470a230b95e4a69442abc62fdebd3bda2fe2ffa6beb156c989252896','active',3,NULL,1767225600077);
CREATE TABLE search_terms (
	scope_id VARCHAR(256) NOT NULL, 
	family VARCHAR(16) NOT NULL, 
	term VARCHAR(64) NOT NULL, 
	df INTEGER NOT NULL, 
	PRIMARY KEY (scope_id, family, term)
);
INSERT INTO search_terms VALUES('git:example.com/acme/api','memory','qblue',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','memory','qdeploy',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','memory','qgo',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','memory','qgreen',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','memory','qswitch',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','memory','qthe',2);
INSERT INTO search_terms VALUES('git:example.com/acme/api','memory','qthrough',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','memory','#docs',2);
INSERT INTO search_terms VALUES('git:example.com/acme/api','memory','qeveri',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','memory','qfirst',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','memory','qkey',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','memory','qmonday',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','memory','qmonth',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','memory','qof',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','memory','qon',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','memory','qrotat',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','memory','qsign',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','experience','qbefor',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','experience','qbrok',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','experience','qdure',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','experience','qearli',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','experience','qit',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','experience','qkey',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','experience','qneed',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','experience','qnew',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','experience','qnot',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','experience','qnoth',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','experience','qreleas',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','experience','qrotat',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','experience','qthem',1);
INSERT INTO search_terms VALUES('git:example.com/acme/api','experience','#docs',1);
CREATE TABLE source_heads (
	scope_id VARCHAR(256) NOT NULL, 
	last_position INTEGER NOT NULL, 
	flush_cursor INTEGER NOT NULL, 
	PRIMARY KEY (scope_id)
);
CREATE TABLE sources (
	scope_id VARCHAR(256) NOT NULL, 
	position INTEGER NOT NULL, 
	source_id VARCHAR(256) NOT NULL, 
	name VARCHAR(32) NOT NULL, 
	payload_hash VARCHAR(64) NOT NULL, 
	content TEXT NOT NULL, 
	metadata TEXT, 
	created_at BIGINT NOT NULL, 
	PRIMARY KEY (scope_id, position), 
	CONSTRAINT uq_sources_source_id UNIQUE (scope_id, source_id)
);
CREATE TABLE tokens (
	token_id VARCHAR(64) NOT NULL, 
	name VARCHAR(128) NOT NULL, 
	secret_hash VARCHAR(64) NOT NULL, 
	scopes TEXT NOT NULL, 
	created_at BIGINT NOT NULL, 
	revoked_at BIGINT, 
	PRIMARY KEY (token_id), 
	CONSTRAINT uq_tokens_name UNIQUE (name)
);
INSERT INTO tokens VALUES('000000000001','local-vm-d41aab2903ce','1b53165bafd522f58ab67fcf8300a2b75754d18964ad985fee7a2ceaa03b64d6','["*"]',1767225600014,NULL);
INSERT INTO tokens VALUES('000000000003','ci','3d7957ef558365e3e9a7e7f3b37683f6803bae6bd5beda9f543f49b3b4d125e1','["git:example.com/acme/*"]',1767225600021,NULL);
CREATE TABLE artifact_heads (
	scope_id VARCHAR(256) NOT NULL, 
	family VARCHAR(16) NOT NULL, 
	artifact_id VARCHAR(128) NOT NULL, 
	revision INTEGER NOT NULL, 
	updated_at BIGINT NOT NULL, 
	PRIMARY KEY (scope_id, family, artifact_id)
);
INSERT INTO artifact_heads VALUES('git:example.com/acme/api','experience','exp_0000000000000000000b',1,1767225600105);
CREATE TABLE artifact_revisions (
	id INTEGER NOT NULL, 
	scope_id VARCHAR(256) NOT NULL, 
	family VARCHAR(16) NOT NULL, 
	artifact_id VARCHAR(128) NOT NULL, 
	revision INTEGER NOT NULL, 
	content TEXT NOT NULL, 
	source_refs TEXT NOT NULL, 
	artifact_refs TEXT NOT NULL, 
	candidate_id VARCHAR(128), 
	candidate_version INTEGER, 
	created_at BIGINT NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_artifact_rev UNIQUE (scope_id, family, artifact_id, revision)
);
INSERT INTO artifact_revisions VALUES(1,'git:example.com/acme/api','experience','exp_0000000000000000000b',1,'{"action":"Rotated them early.","lesson":"Rotate keys before a release, not during it.","outcome":"Nothing broke.","situation":"A release needed new keys."}','[]','[{"family":"memory","artifact_id":"memory","revision":3}]','cand_0000000000000000000a',1,1767225600105);
CREATE TABLE candidates (
	scope_id VARCHAR(256) NOT NULL, 
	candidate_id VARCHAR(128) NOT NULL, 
	family VARCHAR(16) NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	version INTEGER NOT NULL, 
	target TEXT, 
	result_artifact TEXT, 
	decision_reason TEXT, 
	created_at BIGINT NOT NULL, 
	updated_at BIGINT NOT NULL, 
	PRIMARY KEY (scope_id, candidate_id)
);
INSERT INTO candidates VALUES('git:example.com/acme/api','cand_0000000000000000000a','experience','approved',1,NULL,'{"artifact_id":"exp_0000000000000000000b","family":"experience","revision":1}',NULL,1767225600098,1767225600105);
INSERT INTO candidates VALUES('git:example.com/acme/api','cand_0000000000000000000c','experience','pending',1,NULL,NULL,NULL,1767225600112,1767225600112);
CREATE TABLE candidate_versions (
	scope_id VARCHAR(256) NOT NULL, 
	candidate_id VARCHAR(128) NOT NULL, 
	version INTEGER NOT NULL, 
	proposal TEXT NOT NULL, 
	source_refs TEXT NOT NULL, 
	artifact_refs TEXT NOT NULL, 
	reason TEXT, 
	created_at BIGINT NOT NULL, 
	PRIMARY KEY (scope_id, candidate_id, version)
);
INSERT INTO candidate_versions VALUES('git:example.com/acme/api','cand_0000000000000000000a',1,'{"action":"Rotated them early.","lesson":"Rotate keys before a release, not during it.","outcome":"Nothing broke.","situation":"A release needed new keys."}','[]','[{"family":"memory","artifact_id":"memory","revision":3}]',NULL,1767225600098);
INSERT INTO candidate_versions VALUES('git:example.com/acme/api','cand_0000000000000000000c',1,'{"action":"Rotated them early.","lesson":"Keep the previous key valid for a day.","outcome":"Nothing broke.","situation":"A release needed new keys."}','[]','[{"family":"memory","artifact_id":"memory","revision":3}]',NULL,1767225600112);
CREATE TABLE scope_references (
	scope_id VARCHAR(256) NOT NULL, 
	referenced TEXT NOT NULL, 
	version INTEGER NOT NULL, 
	updated_at BIGINT NOT NULL, 
	PRIMARY KEY (scope_id)
);
CREATE TABLE bootstrap_receipts (
	receipt_id VARCHAR(64) NOT NULL, 
	scope_id VARCHAR(256) NOT NULL, 
	integration VARCHAR(64) NOT NULL, 
	lifecycle VARCHAR(16) NOT NULL, 
	event_key VARCHAR(64), 
	fingerprint VARCHAR(64) NOT NULL, 
	state VARCHAR(16) NOT NULL, 
	items TEXT NOT NULL, 
	pack_digest VARCHAR(80), 
	content_bytes INTEGER NOT NULL, 
	created_at BIGINT NOT NULL, 
	updated_at BIGINT NOT NULL, 
	expires_at BIGINT NOT NULL, 
	PRIMARY KEY (receipt_id), 
	CONSTRAINT uq_bootstrap_receipts_event UNIQUE (event_key)
);
PRAGMA writable_schema=ON;
INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)VALUES('table','memory_search_index','memory_search_index',0,'CREATE VIRTUAL TABLE memory_search_index USING fts5(tokens, tokenize=''unicode61 remove_diacritics 0'', content='''', detail=none, columnsize=0)');
CREATE TABLE IF NOT EXISTS 'memory_search_index_data'(id INTEGER PRIMARY KEY, block BLOB);
INSERT INTO memory_search_index_data VALUES(1,X'0211');
INSERT INTO memory_search_index_data VALUES(10,X'000000000103030003010101020101030101');
INSERT INTO memory_search_index_data VALUES(137438953473,X'0000004816306137626566303934396233396638663071626c75650112066465706c6f79011202676f0113047265656e011206737769746368011203746865011405726f7567680104180905070906');
INSERT INTO memory_search_index_data VALUES(274877906945,X'000000401730613762656630393439623339663866307165766572690212036b65790212056d6f6e7468021205726f7461740212047369676e02120374686502041906080807');
INSERT INTO memory_search_index_data VALUES(412316860417,X'00000063173061376265663039343962333966386630716576657269020001120566697273740312036b657902000112066d6f6e646179031502746802000112026f660313016e031205726f74617402000112047369676e0200011203746865020001041b0808090705040a09');
CREATE TABLE IF NOT EXISTS 'memory_search_index_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
INSERT INTO memory_search_index_idx VALUES(1,X'',2);
INSERT INTO memory_search_index_idx VALUES(2,X'',2);
INSERT INTO memory_search_index_idx VALUES(3,X'',2);
CREATE TABLE IF NOT EXISTS 'memory_search_index_config'(k PRIMARY KEY, v) WITHOUT ROWID;
INSERT INTO memory_search_index_config VALUES('version',4);
CREATE TABLE memory_search_docs (id INTEGER PRIMARY KEY, terms TEXT NOT NULL, repeats TEXT NOT NULL);
INSERT INTO memory_search_docs VALUES(1,'qdeploy qgo qthrough qthe qblue qgreen qswitch','qdeploy');
INSERT INTO memory_search_docs VALUES(3,'qrotat qthe qsign qkey qon qfirst qmonday qof qeveri qmonth','qthe');
INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)VALUES('table','experience_search_index','experience_search_index',0,'CREATE VIRTUAL TABLE experience_search_index USING fts5(tokens, tokenize=''unicode61 remove_diacritics 0'', content='''', detail=none, columnsize=0)');
CREATE TABLE IF NOT EXISTS 'experience_search_index_data'(id INTEGER PRIMARY KEY, block BLOB);
INSERT INTO experience_search_index_data VALUES(1,X'010d');
INSERT INTO experience_search_index_data VALUES(10,X'000000000101010001010101');
INSERT INTO experience_search_index_data VALUES(137438953473,X'00000068173061376265663039343962333966386630716265666f72011303726f6b011204647572650112056561726c6901120269740112036b65790112046e656564011401770113026f740115016801120672656c6561730113046f7461740112047468656d0104190607080506070405040907');
CREATE TABLE IF NOT EXISTS 'experience_search_index_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
INSERT INTO experience_search_index_idx VALUES(1,X'',2);
CREATE TABLE IF NOT EXISTS 'experience_search_index_config'(k PRIMARY KEY, v) WITHOUT ROWID;
INSERT INTO experience_search_index_config VALUES('version',4);
CREATE TABLE experience_search_docs (id INTEGER PRIMARY KEY, terms TEXT NOT NULL, repeats TEXT NOT NULL);
INSERT INTO experience_search_docs VALUES(1,'qreleas qneed qnew qkey qrotat qthem qearli qnoth qbrok qbefor qnot qdure qit','qrotat qkey qreleas');
CREATE INDEX ix_memory_entries_order ON memory_entries (scope_id, created_revision, entry_id);
CREATE INDEX ix_memory_entries_hash ON memory_entries (scope_id, content_hash);
CREATE INDEX ix_candidates_inbox ON candidates (scope_id, status, created_at, candidate_id);
CREATE INDEX ix_bootstrap_receipts_expiry ON bootstrap_receipts (expires_at);
PRAGMA writable_schema=OFF;
COMMIT;
