-- The current version of a resource lives in `resource` only; `resource_version` keeps the versions
-- it replaced (history and vread read both). Before, every version was written twice: the JSON of
-- every current version stored once more, the largest single cost of a stored slot.
DELETE FROM resource_version v
 USING resource r
 WHERE v.resource_type = r.resource_type AND v.id = r.id AND v.version_id = r.version_id;
