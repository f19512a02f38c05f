CREATE TABLE `artifact_heads` (
  `scope_id` varchar(256) COLLATE utf8mb4_bin NOT NULL,
  `family` varchar(16) COLLATE utf8mb4_bin NOT NULL,
  `artifact_id` varchar(128) COLLATE utf8mb4_bin NOT NULL,
  `revision` int(11) NOT NULL,
  `updated_at` bigint(20) NOT NULL,
  PRIMARY KEY (`scope_id`, `family`, `artifact_id`)
) ORGANIZATION INDEX DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin ROW_FORMAT = DYNAMIC COMPRESSION = 'zstd_1.3.8' BLOCK_SIZE = 16384 TABLET_SIZE = 134217728 PCTFREE = 0;
CREATE TABLE `artifact_revisions` (
  `id` bigint(20) NOT NULL AUTO_INCREMENT,
  `scope_id` varchar(256) COLLATE utf8mb4_bin NOT NULL,
  `family` varchar(16) COLLATE utf8mb4_bin NOT NULL,
  `artifact_id` varchar(128) COLLATE utf8mb4_bin NOT NULL,
  `revision` int(11) NOT NULL,
  `content` mediumtext COLLATE utf8mb4_bin NOT NULL,
  `source_refs` text COLLATE utf8mb4_bin NOT NULL,
  `artifact_refs` text COLLATE utf8mb4_bin NOT NULL,
  `candidate_id` varchar(128) COLLATE utf8mb4_bin DEFAULT NULL,
  `candidate_version` int(11) DEFAULT NULL,
  `created_at` bigint(20) NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_artifact_rev` (`scope_id`, `family`, `artifact_id`, `revision`) BLOCK_SIZE 16384 LOCAL
) ORGANIZATION INDEX AUTO_INCREMENT = 2 DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin ROW_FORMAT = DYNAMIC COMPRESSION = 'zstd_1.3.8' BLOCK_SIZE = 16384 TABLET_SIZE = 134217728 PCTFREE = 0;
CREATE TABLE `bootstrap_receipts` (
  `receipt_id` varchar(64) COLLATE utf8mb4_bin NOT NULL,
  `scope_id` varchar(256) COLLATE utf8mb4_bin NOT NULL,
  `integration` varchar(64) COLLATE utf8mb4_bin NOT NULL,
  `lifecycle` varchar(16) COLLATE utf8mb4_bin NOT NULL,
  `event_key` varchar(64) COLLATE utf8mb4_bin DEFAULT NULL,
  `fingerprint` varchar(64) COLLATE utf8mb4_bin NOT NULL,
  `state` varchar(16) COLLATE utf8mb4_bin NOT NULL,
  `items` text COLLATE utf8mb4_bin NOT NULL,
  `pack_digest` varchar(80) COLLATE utf8mb4_bin DEFAULT NULL,
  `content_bytes` int(11) NOT NULL,
  `created_at` bigint(20) NOT NULL,
  `updated_at` bigint(20) NOT NULL,
  `expires_at` bigint(20) NOT NULL,
  PRIMARY KEY (`receipt_id`),
  UNIQUE KEY `uq_bootstrap_receipts_event` (`event_key`) BLOCK_SIZE 16384 LOCAL,
  KEY `ix_bootstrap_receipts_expiry` (`expires_at`) BLOCK_SIZE 16384 LOCAL
) ORGANIZATION INDEX DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin ROW_FORMAT = DYNAMIC COMPRESSION = 'zstd_1.3.8' BLOCK_SIZE = 16384 TABLET_SIZE = 134217728 PCTFREE = 0;
CREATE TABLE `candidate_versions` (
  `scope_id` varchar(256) COLLATE utf8mb4_bin NOT NULL,
  `candidate_id` varchar(128) COLLATE utf8mb4_bin NOT NULL,
  `version` int(11) NOT NULL,
  `proposal` mediumtext COLLATE utf8mb4_bin NOT NULL,
  `source_refs` text COLLATE utf8mb4_bin NOT NULL,
  `artifact_refs` text COLLATE utf8mb4_bin NOT NULL,
  `reason` text COLLATE utf8mb4_bin DEFAULT NULL,
  `created_at` bigint(20) NOT NULL,
  PRIMARY KEY (`scope_id`, `candidate_id`, `version`)
) ORGANIZATION INDEX DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin ROW_FORMAT = DYNAMIC COMPRESSION = 'zstd_1.3.8' BLOCK_SIZE = 16384 TABLET_SIZE = 134217728 PCTFREE = 0;
CREATE TABLE `candidates` (
  `scope_id` varchar(256) COLLATE utf8mb4_bin NOT NULL,
  `candidate_id` varchar(128) COLLATE utf8mb4_bin NOT NULL,
  `family` varchar(16) COLLATE utf8mb4_bin NOT NULL,
  `status` varchar(16) COLLATE utf8mb4_bin NOT NULL,
  `version` int(11) NOT NULL,
  `target` text COLLATE utf8mb4_bin DEFAULT NULL,
  `result_artifact` text COLLATE utf8mb4_bin DEFAULT NULL,
  `decision_reason` text COLLATE utf8mb4_bin DEFAULT NULL,
  `created_at` bigint(20) NOT NULL,
  `updated_at` bigint(20) NOT NULL,
  PRIMARY KEY (`scope_id`, `candidate_id`),
  KEY `ix_candidates_inbox` (`scope_id`, `status`, `created_at`, `candidate_id`) BLOCK_SIZE 16384 LOCAL
) ORGANIZATION INDEX DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin ROW_FORMAT = DYNAMIC COMPRESSION = 'zstd_1.3.8' BLOCK_SIZE = 16384 TABLET_SIZE = 134217728 PCTFREE = 0;
CREATE TABLE `experience_search` (
  `id` bigint(20) NOT NULL,
  `scope_id` varchar(256) COLLATE utf8mb4_bin NOT NULL,
  `terms` longtext COLLATE utf8mb4_bin NOT NULL,
  PRIMARY KEY (`id`),
  KEY `ix_experience_search_scope` (`scope_id`) BLOCK_SIZE 16384 LOCAL,
  FULLTEXT KEY `ft_experience_search` (`terms`) WITH PARSER space PARSER_PROPERTIES=(min_token_size=1,max_token_size=84) BLOCK_SIZE 16384
) ORGANIZATION INDEX DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin ROW_FORMAT = DYNAMIC COMPRESSION = 'zstd_1.3.8' BLOCK_SIZE = 16384 TABLET_SIZE = 134217728 PCTFREE = 0;
CREATE TABLE `memory_entries` (
  `scope_id` varchar(256) COLLATE utf8mb4_bin NOT NULL,
  `entry_id` varchar(128) COLLATE utf8mb4_bin NOT NULL,
  `created_revision` int(11) NOT NULL,
  `current_version_id` varchar(128) COLLATE utf8mb4_bin NOT NULL,
  `current_version` int(11) NOT NULL,
  `state` varchar(16) COLLATE utf8mb4_bin NOT NULL,
  `content_hash` varchar(64) COLLATE utf8mb4_bin NOT NULL,
  PRIMARY KEY (`scope_id`, `entry_id`),
  KEY `ix_memory_entries_hash` (`scope_id`, `content_hash`) BLOCK_SIZE 16384 LOCAL,
  KEY `ix_memory_entries_order` (`scope_id`, `created_revision`, `entry_id`) BLOCK_SIZE 16384 LOCAL
) ORGANIZATION INDEX DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin ROW_FORMAT = DYNAMIC COMPRESSION = 'zstd_1.3.8' BLOCK_SIZE = 16384 TABLET_SIZE = 134217728 PCTFREE = 0;
CREATE TABLE `memory_heads` (
  `scope_id` varchar(256) COLLATE utf8mb4_bin NOT NULL,
  `revision` int(11) NOT NULL,
  `updated_at` bigint(20) NOT NULL,
  PRIMARY KEY (`scope_id`)
) ORGANIZATION INDEX DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin ROW_FORMAT = DYNAMIC COMPRESSION = 'zstd_1.3.8' BLOCK_SIZE = 16384 TABLET_SIZE = 134217728 PCTFREE = 0;
CREATE TABLE `memory_revisions` (
  `scope_id` varchar(256) COLLATE utf8mb4_bin NOT NULL,
  `revision` int(11) NOT NULL,
  `operation` varchar(16) COLLATE utf8mb4_bin NOT NULL,
  `entry_id` varchar(128) COLLATE utf8mb4_bin NOT NULL,
  `entry_version_id` varchar(128) COLLATE utf8mb4_bin NOT NULL,
  `created_at` bigint(20) NOT NULL,
  PRIMARY KEY (`scope_id`, `revision`)
) ORGANIZATION INDEX DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin ROW_FORMAT = DYNAMIC COMPRESSION = 'zstd_1.3.8' BLOCK_SIZE = 16384 TABLET_SIZE = 134217728 PCTFREE = 0;
CREATE TABLE `memory_search` (
  `id` bigint(20) NOT NULL,
  `scope_id` varchar(256) COLLATE utf8mb4_bin NOT NULL,
  `terms` longtext COLLATE utf8mb4_bin NOT NULL,
  PRIMARY KEY (`id`),
  KEY `ix_memory_search_scope` (`scope_id`) BLOCK_SIZE 16384 LOCAL,
  FULLTEXT KEY `ft_memory_search` (`terms`) WITH PARSER space PARSER_PROPERTIES=(min_token_size=1,max_token_size=84) BLOCK_SIZE 16384
) ORGANIZATION INDEX DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin ROW_FORMAT = DYNAMIC COMPRESSION = 'zstd_1.3.8' BLOCK_SIZE = 16384 TABLET_SIZE = 134217728 PCTFREE = 0;
CREATE TABLE `memory_versions` (
  `id` bigint(20) NOT NULL AUTO_INCREMENT,
  `scope_id` varchar(256) COLLATE utf8mb4_bin NOT NULL,
  `entry_id` varchar(128) COLLATE utf8mb4_bin NOT NULL,
  `entry_version_id` varchar(128) COLLATE utf8mb4_bin NOT NULL,
  `version` int(11) NOT NULL,
  `kind` varchar(128) COLLATE utf8mb4_bin NOT NULL,
  `text` text COLLATE utf8mb4_bin NOT NULL,
  `tags` text COLLATE utf8mb4_bin NOT NULL,
  `reason` text COLLATE utf8mb4_bin DEFAULT NULL,
  `source_refs` text COLLATE utf8mb4_bin NOT NULL,
  `artifact_refs` text COLLATE utf8mb4_bin NOT NULL,
  `content_hash` varchar(64) COLLATE utf8mb4_bin NOT NULL,
  `state` varchar(16) COLLATE utf8mb4_bin NOT NULL,
  `valid_from` int(11) NOT NULL,
  `valid_to` int(11) DEFAULT NULL,
  `created_at` bigint(20) NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_memory_versions_id` (`scope_id`, `entry_version_id`) BLOCK_SIZE 16384 LOCAL,
  UNIQUE KEY `uq_memory_versions_entry` (`scope_id`, `entry_id`, `version`) BLOCK_SIZE 16384 LOCAL
) ORGANIZATION INDEX AUTO_INCREMENT = 4 DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin ROW_FORMAT = DYNAMIC COMPRESSION = 'zstd_1.3.8' BLOCK_SIZE = 16384 TABLET_SIZE = 134217728 PCTFREE = 0;
CREATE TABLE `scope_references` (
  `scope_id` varchar(256) COLLATE utf8mb4_bin NOT NULL,
  `referenced` text COLLATE utf8mb4_bin NOT NULL,
  `version` int(11) NOT NULL,
  `updated_at` bigint(20) NOT NULL,
  PRIMARY KEY (`scope_id`)
) ORGANIZATION INDEX DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin ROW_FORMAT = DYNAMIC COMPRESSION = 'zstd_1.3.8' BLOCK_SIZE = 16384 TABLET_SIZE = 134217728 PCTFREE = 0;
CREATE TABLE `search_terms` (
  `scope_id` varchar(256) COLLATE utf8mb4_bin NOT NULL,
  `family` varchar(16) COLLATE utf8mb4_bin NOT NULL,
  `term` varchar(64) COLLATE utf8mb4_bin NOT NULL,
  `df` int(11) NOT NULL,
  PRIMARY KEY (`scope_id`, `family`, `term`)
) ORGANIZATION INDEX DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin ROW_FORMAT = DYNAMIC COMPRESSION = 'zstd_1.3.8' BLOCK_SIZE = 16384 TABLET_SIZE = 134217728 PCTFREE = 0;
CREATE TABLE `source_heads` (
  `scope_id` varchar(256) COLLATE utf8mb4_bin NOT NULL,
  `last_position` int(11) NOT NULL,
  `flush_cursor` int(11) NOT NULL,
  PRIMARY KEY (`scope_id`)
) ORGANIZATION INDEX DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin ROW_FORMAT = DYNAMIC COMPRESSION = 'zstd_1.3.8' BLOCK_SIZE = 16384 TABLET_SIZE = 134217728 PCTFREE = 0;
CREATE TABLE `sources` (
  `scope_id` varchar(256) COLLATE utf8mb4_bin NOT NULL,
  `position` int(11) NOT NULL,
  `source_id` varchar(256) COLLATE utf8mb4_bin NOT NULL,
  `name` varchar(32) COLLATE utf8mb4_bin NOT NULL,
  `payload_hash` varchar(64) COLLATE utf8mb4_bin NOT NULL,
  `content` mediumtext COLLATE utf8mb4_bin NOT NULL,
  `metadata` text COLLATE utf8mb4_bin DEFAULT NULL,
  `created_at` bigint(20) NOT NULL,
  PRIMARY KEY (`scope_id`, `position`),
  UNIQUE KEY `uq_sources_source_id` (`scope_id`, `source_id`) BLOCK_SIZE 16384 LOCAL
) ORGANIZATION INDEX DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin ROW_FORMAT = DYNAMIC COMPRESSION = 'zstd_1.3.8' BLOCK_SIZE = 16384 TABLET_SIZE = 134217728 PCTFREE = 0;
CREATE TABLE `tokens` (
  `token_id` varchar(64) COLLATE utf8mb4_bin NOT NULL,
  `name` varchar(128) COLLATE utf8mb4_bin NOT NULL,
  `secret_hash` varchar(64) COLLATE utf8mb4_bin NOT NULL,
  `scopes` text COLLATE utf8mb4_bin NOT NULL,
  `created_at` bigint(20) NOT NULL,
  `revoked_at` bigint(20) DEFAULT NULL,
  PRIMARY KEY (`token_id`),
  UNIQUE KEY `uq_tokens_name` (`name`) BLOCK_SIZE 16384 LOCAL
) ORGANIZATION INDEX DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin ROW_FORMAT = DYNAMIC COMPRESSION = 'zstd_1.3.8' BLOCK_SIZE = 16384 TABLET_SIZE = 134217728 PCTFREE = 0;
INSERT INTO `artifact_heads` (`scope_id`, `family`, `artifact_id`, `revision`, `updated_at`) VALUES ('git:example.com/acme/api', 'experience', 'exp_0000000000000000000b', 1, 1767225600189);
INSERT INTO `artifact_revisions` (`id`, `scope_id`, `family`, `artifact_id`, `revision`, `content`, `source_refs`, `artifact_refs`, `candidate_id`, `candidate_version`, `created_at`) VALUES (1, 'git:example.com/acme/api', 'experience', 'exp_0000000000000000000b', 1, '{\"action\":\"Rotated them early.\",\"lesson\":\"Rotate keys before a release, not during it.\",\"outcome\":\"Nothing broke.\",\"situation\":\"A release needed new keys.\"}', '[]', '[{\"family\":\"memory\",\"artifact_id\":\"memory\",\"revision\":3}]', 'cand_0000000000000000000a', 1, 1767225600189);
INSERT INTO `candidate_versions` (`scope_id`, `candidate_id`, `version`, `proposal`, `source_refs`, `artifact_refs`, `reason`, `created_at`) VALUES ('git:example.com/acme/api', 'cand_0000000000000000000a', 1, '{\"action\":\"Rotated them early.\",\"lesson\":\"Rotate keys before a release, not during it.\",\"outcome\":\"Nothing broke.\",\"situation\":\"A release needed new keys.\"}', '[]', '[{\"family\":\"memory\",\"artifact_id\":\"memory\",\"revision\":3}]', NULL, 1767225600175);
INSERT INTO `candidate_versions` (`scope_id`, `candidate_id`, `version`, `proposal`, `source_refs`, `artifact_refs`, `reason`, `created_at`) VALUES ('git:example.com/acme/api', 'cand_0000000000000000000c', 1, '{\"action\":\"Rotated them early.\",\"lesson\":\"Keep the previous key valid for a day.\",\"outcome\":\"Nothing broke.\",\"situation\":\"A release needed new keys.\"}', '[]', '[{\"family\":\"memory\",\"artifact_id\":\"memory\",\"revision\":3}]', NULL, 1767225600203);
INSERT INTO `candidates` (`scope_id`, `candidate_id`, `family`, `status`, `version`, `target`, `result_artifact`, `decision_reason`, `created_at`, `updated_at`) VALUES ('git:example.com/acme/api', 'cand_0000000000000000000a', 'experience', 'approved', 1, NULL, '{\"artifact_id\":\"exp_0000000000000000000b\",\"family\":\"experience\",\"revision\":1}', NULL, 1767225600175, 1767225600189);
INSERT INTO `candidates` (`scope_id`, `candidate_id`, `family`, `status`, `version`, `target`, `result_artifact`, `decision_reason`, `created_at`, `updated_at`) VALUES ('git:example.com/acme/api', 'cand_0000000000000000000c', 'experience', 'pending', 1, NULL, NULL, NULL, 1767225600203, 1767225600203);
INSERT INTO `experience_search` (`id`, `scope_id`, `terms`) VALUES (1, 'git:example.com/acme/api', 'qreleas qneed qnew qkey qrotat qthem qearli qnoth qbrok qrotat qkey qbefor qreleas qnot qdure qit');
INSERT INTO `memory_entries` (`scope_id`, `entry_id`, `created_revision`, `current_version_id`, `current_version`, `state`, `content_hash`) VALUES ('git:example.com/acme/api', 'mem_ent_00000000000000000005', 1, 'mem_ver_00000000000000000006', 1, 'active', 'e02ebf6bc8e9240d76261aacb4503f16513e8f44dfbfbd4ce4c9ae55fa09a78a');
INSERT INTO `memory_entries` (`scope_id`, `entry_id`, `created_revision`, `current_version_id`, `current_version`, `state`, `content_hash`) VALUES ('git:example.com/acme/api', 'mem_ent_00000000000000000007', 2, 'mem_ver_00000000000000000009', 2, 'active', '639ce305470a230b95e4a69442abc62fdebd3bda2fe2ffa6beb156c989252896');
INSERT INTO `memory_heads` (`scope_id`, `revision`, `updated_at`) VALUES ('git:example.com/acme/api', 3, 1767225600161);
INSERT INTO `memory_revisions` (`scope_id`, `revision`, `operation`, `entry_id`, `entry_version_id`, `created_at`) VALUES ('git:example.com/acme/api', 1, 'remember', 'mem_ent_00000000000000000005', 'mem_ver_00000000000000000006', 1767225600098);
INSERT INTO `memory_revisions` (`scope_id`, `revision`, `operation`, `entry_id`, `entry_version_id`, `created_at`) VALUES ('git:example.com/acme/api', 2, 'remember', 'mem_ent_00000000000000000007', 'mem_ver_00000000000000000008', 1767225600126);
INSERT INTO `memory_revisions` (`scope_id`, `revision`, `operation`, `entry_id`, `entry_version_id`, `created_at`) VALUES ('git:example.com/acme/api', 3, 'revise', 'mem_ent_00000000000000000007', 'mem_ver_00000000000000000009', 1767225600154);
INSERT INTO `memory_search` (`id`, `scope_id`, `terms`) VALUES (1, 'git:example.com/acme/api', 'qdeploy qgo qthrough qthe qblue qgreen qswitch qdeploy');
INSERT INTO `memory_search` (`id`, `scope_id`, `terms`) VALUES (3, 'git:example.com/acme/api', 'qrotat qthe qsign qkey qon qthe qfirst qmonday qof qeveri qmonth');
INSERT INTO `memory_versions` (`id`, `scope_id`, `entry_id`, `entry_version_id`, `version`, `kind`, `text`, `tags`, `reason`, `source_refs`, `artifact_refs`, `content_hash`, `state`, `valid_from`, `valid_to`, `created_at`) VALUES (1, 'git:example.com/acme/api', 'mem_ent_00000000000000000005', 'mem_ver_00000000000000000006', 1, 'fact', 'Deploys go through the blue green switch.', '[\"deploy\"]', NULL, '[]', '[]', 'e02ebf6bc8e9240d76261aacb4503f16513e8f44dfbfbd4ce4c9ae55fa09a78a', 'active', 1, NULL, 1767225600091);
INSERT INTO `memory_versions` (`id`, `scope_id`, `entry_id`, `entry_version_id`, `version`, `kind`, `text`, `tags`, `reason`, `source_refs`, `artifact_refs`, `content_hash`, `state`, `valid_from`, `valid_to`, `created_at`) VALUES (2, 'git:example.com/acme/api', 'mem_ent_00000000000000000007', 'mem_ver_00000000000000000008', 1, 'procedure', 'Rotate the signing keys every month.', '[]', NULL, '[]', '[]', '28e46a44f4d007792b21008e46bc470599ab210aa79456cbd7d094efd45897e6', 'active', 2, 3, 1767225600119);
INSERT INTO `memory_versions` (`id`, `scope_id`, `entry_id`, `entry_version_id`, `version`, `kind`, `text`, `tags`, `reason`, `source_refs`, `artifact_refs`, `content_hash`, `state`, `valid_from`, `valid_to`, `created_at`) VALUES (3, 'git:example.com/acme/api', 'mem_ent_00000000000000000007', 'mem_ver_00000000000000000009', 2, 'procedure', 'Rotate the signing keys on the first Monday of every month.', '[]', NULL, '[]', '[]', '639ce305470a230b95e4a69442abc62fdebd3bda2fe2ffa6beb156c989252896', 'active', 3, NULL, 1767225600147);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'experience', '#docs', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'experience', 'qbefor', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'experience', 'qbrok', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'experience', 'qdure', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'experience', 'qearli', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'experience', 'qit', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'experience', 'qkey', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'experience', 'qneed', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'experience', 'qnew', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'experience', 'qnot', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'experience', 'qnoth', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'experience', 'qreleas', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'experience', 'qrotat', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'experience', 'qthem', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'memory', '#docs', 2);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'memory', 'qblue', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'memory', 'qdeploy', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'memory', 'qeveri', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'memory', 'qfirst', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'memory', 'qgo', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'memory', 'qgreen', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'memory', 'qkey', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'memory', 'qmonday', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'memory', 'qmonth', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'memory', 'qof', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'memory', 'qon', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'memory', 'qrotat', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'memory', 'qsign', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'memory', 'qswitch', 1);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'memory', 'qthe', 2);
INSERT INTO `search_terms` (`scope_id`, `family`, `term`, `df`) VALUES ('git:example.com/acme/api', 'memory', 'qthrough', 1);
INSERT INTO `tokens` (`token_id`, `name`, `secret_hash`, `scopes`, `created_at`, `revoked_at`) VALUES ('000000000001', 'local-vm-81f421b36613', '1b53165bafd522f58ab67fcf8300a2b75754d18964ad985fee7a2ceaa03b64d6', '[\"*\"]', 1767225600056, NULL);
INSERT INTO `tokens` (`token_id`, `name`, `secret_hash`, `scopes`, `created_at`, `revoked_at`) VALUES ('000000000003', 'ci', '3d7957ef558365e3e9a7e7f3b37683f6803bae6bd5beda9f543f49b3b4d125e1', '[\"git:example.com/acme/*\"]', 1767225600070, NULL);
