-- OrderFlow schema, version 9: erasing a customer's data on request.
--
-- A finished order's personal data (its attributes, content, the inputs of its transitions and
-- what they rendered) is replaced by redactions while its shape stays: states, sequence numbers,
-- times, counts (`orderflow order redact`, `POST /v1/orders/{id}/redact`). Devices are deleted
-- outright (`orderflow device forget`, `DELETE /v1/devices/{device}`) and need nothing here.
--
-- Additive only: a binary of the previous release never calls the new function, and history
-- stays as append-only for it as before.

-- A JSON value with its shape kept and its data gone: every string becomes "(redacted)", every
-- number 0; keys, arrays' lengths, booleans and nulls stay. Redacting a redaction changes
-- nothing.
CREATE FUNCTION orderflow_redacted(value jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
BEGIN
    CASE jsonb_typeof(value)
    WHEN 'object' THEN
        RETURN coalesce((SELECT jsonb_object_agg(e.key, orderflow_redacted(e.value)) FROM jsonb_each(value) AS e), '{}'::jsonb);
    WHEN 'array' THEN
        RETURN coalesce((SELECT jsonb_agg(orderflow_redacted(a.value) ORDER BY a.position)
                         FROM jsonb_array_elements(value) WITH ORDINALITY AS a(value, position)), '[]'::jsonb);
    WHEN 'string' THEN
        RETURN '"(redacted)"'::jsonb;
    WHEN 'number' THEN
        RETURN '0'::jsonb;
    ELSE
        RETURN value;
    END CASE;
END
$$;

-- History stays append-only, with two narrow exceptions, each for a transaction that set its
-- transaction-local flag (`set_config(…, true)`): the purge (`orderflow.purging`) may delete
-- whole orders' rows, as migration 8 allows; a redaction (`orderflow.redacting`) may rewrite a
-- transition's input and rendering, never its shape (ids, states, event, actor, key, time).
CREATE OR REPLACE FUNCTION orderflow_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('orderflow.purging', true) = 'on' THEN
        RETURN OLD;
    END IF;
    IF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'order_transitions'
       AND current_setting('orderflow.redacting', true) = 'on' THEN
        IF (NEW.merchant_id, NEW.order_id, NEW.seq, NEW.from_state, NEW.to_state, NEW.event, NEW.actor,
            NEW.idempotency_key, NEW.occurred_at, NEW.tx)
           IS NOT DISTINCT FROM
           (OLD.merchant_id, OLD.order_id, OLD.seq, OLD.from_state, OLD.to_state, OLD.event, OLD.actor,
            OLD.idempotency_key, OLD.occurred_at, OLD.tx) THEN
            RETURN NEW;
        END IF;
    END IF;
    RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation',
              HINT = 'apply a new version instead of changing an old one';
END
$$;
