-- exercises: GROUP BY over the Nexmark bids: distinct bidders per channel, hot channels only
-- tables: bid
-- expect: rows
SELECT channel, count(*) AS bids, count(DISTINCT bidder) AS bidders, max(price) AS top FROM bid WHERE channel IN ('Google', 'Apple', 'Baidu', 'Facebook') GROUP BY channel
